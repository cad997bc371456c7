/// Placeholder until the example lands.
public enum PostsRepositoryExamplePlaceholder {}
