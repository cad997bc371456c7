/// A loader that names the tier in the provenance it records itself, and so can carry the name a
/// ``Loader/named(_:)`` directly around it gives, instead of that operator binding the name for each
/// load (``LoadRecorder/tierName(default:)`` is the bound form). Beside the tier name it stands for.
protocol TierNameCarrying {
    /// This loader, reporting `name` as its tier.
    func carryingTierName(_ name: String) -> Self
}
