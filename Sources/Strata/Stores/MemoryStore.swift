import Foundation

/// An in-memory store that evicts by entry count and by total cost, keeping the entries that are read.
///
/// Eviction is CLOCK (second chance), the approximation of least-recently-used that Nuke's image cache
/// and most operating systems' page caches use: a hit only sets the entry's *referenced* bit (and not
/// even that when it is already set), so a read never relinks a list. When an insert goes past a
/// limit, a hand sweeps the entries in insertion order, clearing set bits and evicting the first entry
/// not read since the hand last passed it. An entry read since it was inserted therefore outlives one
/// that was not; among entries that were all read (or all not), the oldest goes first.
///
/// Reads and writes take one lock; all bookkeeping is O(1) amortised, with no per-entry objects. The
/// hit path is `@inlinable`, so an app's calls are specialised for its key and value types.
///
/// ```swift
/// let memory = MemoryStore<String, [FeedItem]>(countLimit: 100, costLimit: 10_000) { $0.count }
/// if let hit = memory.immediateEntry(for: "feed") { show(hit.value) }   // synchronous, no suspension
/// ```
public final class MemoryStore<Key: Hashable & Sendable, Value: Sendable>: Store, Sendable {
    /// The maximum number of entries; `nil` for no limit.
    public let countLimit: Int?
    /// The maximum total cost; `nil` for no limit.
    public let costLimit: Int?
    private let cost: @Sendable (Value) -> Int
    @usableFromInline let state: InlinableLocked<ClockTable<Key, CacheEntry<Value>>>

    /// Creates an empty store.
    /// - Parameters:
    ///   - countLimit: the most entries kept; entries not read recently are evicted beyond it.
    ///   - costLimit: the most total cost kept; an entry costlier than the whole limit is not kept.
    ///   - cost: the cost of one value (for example its byte count); every value costs 0 by default.
    public init(countLimit: Int? = nil, costLimit: Int? = nil, cost: @escaping @Sendable (Value) -> Int = { _ in 0 }) {
        precondition(countLimit.map { $0 > 0 } ?? true, "countLimit must be positive")
        precondition(costLimit.map { $0 >= 0 } ?? true, "costLimit must not be negative")
        self.countLimit = countLimit
        self.costLimit = costLimit
        self.cost = cost
        self.state = InlinableLocked(ClockTable())
    }

    public var origin: Origin { .memory }

    @inlinable
    public func retrieve(_ key: Key) async throws -> CacheEntry<Value>? {
        state.withLock { $0.lookup(key) }
    }

    /// The entry for `key`, read synchronously (the same lookup ``retrieve(_:)`` does, without an
    /// `async` call): what a chain's hit path (``Loader/loadImmediately(_:in:)``) reads.
    @inlinable
    public func immediateEntry(for key: Key) -> CacheEntry<Value>? {
        state.withLock { $0.lookup(key) }
    }

    public func insert(_ entry: CacheEntry<Value>, for key: Key) async throws {
        let entryCost = max(0, cost(entry.value))
        state.withLock { table in
            if let costLimit, entryCost > costLimit {
                // Keeping it would evict everything else and still break the limit: drop it instead,
                // together with the now-outdated previous value for the key.
                table.remove(key)
                return
            }
            let position = table.upsert(key, entry, cost: entryCost)
            while let countLimit, table.count > countLimit, table.evictOne(sparing: position) {}
            while let costLimit, table.totalCost > costLimit, table.evictOne(sparing: position) {}
        }
    }

    public func delete(_ key: Key) async throws {
        state.withLock { $0.remove(key) }
    }

    /// Re-stamps the entry in place under the lock (the value is not copied or re-costed) and marks
    /// it referenced.
    public func refresh(_ key: Key, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        state.withLock { table in
            table.update(key) { entry in
                entry.storedAt = storedAt
                entry.validators = validators
            }
        }
    }

    /// Removes every entry under the lock; the count and cost limits count from zero again.
    public func removeAll() async throws {
        state.withLock { $0 = ClockTable() }
    }

    /// The number of entries held.
    public var count: Int { state.withLock { $0.count } }

    /// The total cost of the entries held.
    public var totalCost: Int { state.withLock { $0.totalCost } }

    /// The keys held, in no particular order (for tests and diagnostics).
    public var keys: Set<Key> { state.withLock { $0.keys } }
}

extension MemoryStore: CustomStringConvertible {
    public var description: String { "MemoryStore" }
}

/// Entries in slots with a referenced bit, swept by a CLOCK hand. Free slots are reused.
@usableFromInline
struct ClockTable<Key: Hashable & Sendable, Element: Sendable>: Sendable {
    @usableFromInline
    struct Slot: Sendable {
        @usableFromInline var key: Key?
        @usableFromInline var element: Element?
        @usableFromInline var cost: Int
        @usableFromInline var referenced: Bool
    }

    @usableFromInline var slots: ContiguousArray<Slot> = []
    @usableFromInline var index: [Key: Int] = [:]
    private var free: [Int] = []
    private var hand = 0
    private(set) var totalCost = 0

    @usableFromInline init() {}

    var count: Int { index.count }

    var keys: Set<Key> { Set(index.keys) }

    /// The element for `key`, marking it referenced: a write only the first time after the hand passed.
    @inlinable
    mutating func lookup(_ key: Key) -> Element? {
        guard let position = index[key] else { return nil }
        if !slots[position].referenced { slots[position].referenced = true }
        return slots[position].element
    }

    /// Changes the element for `key` in place, marking it referenced; `false` when absent.
    mutating func update(_ key: Key, _ change: (inout Element) -> Void) -> Bool {
        guard let position = index[key] else { return false }
        change(&slots[position].element!)
        slots[position].referenced = true
        return true
    }

    /// Stores `element` for `key` and returns its slot. A replaced entry keeps its slot and counts as
    /// referenced; a new one starts unreferenced, so it goes before entries that were read.
    @discardableResult
    mutating func upsert(_ key: Key, _ element: Element, cost: Int) -> Int {
        if let position = index[key] {
            totalCost += cost - slots[position].cost
            slots[position].element = element
            slots[position].cost = cost
            slots[position].referenced = true
            return position
        }
        let slot = Slot(key: key, element: element, cost: cost, referenced: false)
        let position: Int
        if let reused = free.popLast() {
            position = reused
            slots[position] = slot
        } else {
            position = slots.count
            slots.append(slot)
        }
        index[key] = position
        totalCost += cost
        return position
    }

    mutating func remove(_ key: Key) {
        guard let position = index.removeValue(forKey: key) else { return }
        totalCost -= slots[position].cost
        slots[position] = Slot(key: nil, element: nil, cost: 0, referenced: false)
        free.append(position)
    }

    /// Evicts one entry other than the one in slot `spared` (the entry being inserted): the first the
    /// hand finds unreferenced, clearing the bits it passes. `false` when there is no other entry.
    mutating func evictOne(sparing spared: Int) -> Bool {
        guard count > (slots[spared].key == nil ? 0 : 1) else { return false }
        while true {
            if hand >= slots.count { hand = 0 }
            let position = hand
            hand += 1
            guard position != spared, let key = slots[position].key else { continue }
            if slots[position].referenced {
                slots[position].referenced = false
            } else {
                remove(key)
                return true
            }
        }
    }
}
