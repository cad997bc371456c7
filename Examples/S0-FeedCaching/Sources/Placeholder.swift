/// Placeholder until the example lands.
public enum FeedCachingExamplePlaceholder {}
