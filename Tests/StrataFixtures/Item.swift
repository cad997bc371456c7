/// The small `Codable` value the store and operator tests of every test target store and load.
/// A target of its own (no product ships it), so the three test targets share one definition.
public struct Item: Codable, Equatable, Hashable, Sendable {
    public var id: Int
    public var name: String

    public init(id: Int, name: String) {
        self.id = id
        self.name = name
    }
}

public let itemA = Item(id: 1, name: "a")
public let itemB = Item(id: 2, name: "b")
/// A value whose name needs more than ASCII: what a store must keep byte for byte.
public let itemUnicode = Item(id: 2, name: "b — ü")
