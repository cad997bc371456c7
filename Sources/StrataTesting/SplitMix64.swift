/// A small, fast, seeded random number generator (SplitMix64), so a randomised test — a fuzz loop,
/// a stress interleaving, a kill schedule — can be replayed exactly from the seed it prints.
///
/// Not for anything that needs unpredictability: it is fully determined by its seed.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The generator's state; the next value is derived from it.
    public var state: UInt64

    /// A generator that starts from `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
