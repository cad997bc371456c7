/// Where a keyed operator gets a load's key: one fixed key (`store.loader(key: "feed")`), or a
/// function of the input. A fixed key is stored as it is, so a load reads it without calling a
/// closure that copies it out of a capture.
@usableFromInline
enum KeySource<Input, Key>: Sendable where Key: Sendable {
    case constant(Key)
    case derived(@Sendable (Input) -> Key)

    @inlinable
    func callAsFunction(_ input: Input) -> Key {
        switch self {
        case .constant(let key): key
        case .derived(let key): key(input)
        }
    }
}
