import Foundation

/// An in-memory store with least-recently-used eviction by entry count and by total cost.
///
/// Reads and writes take one lock; all bookkeeping is O(1): entries live in a dictionary and an
/// intrusive doubly-linked list of slot indices (no per-entry objects, so no reference counting on
/// the hot path). A hit moves the entry to the front; inserting beyond a limit evicts from the back.
///
/// ```swift
/// let memory = MemoryStore<String, [FeedItem]>(countLimit: 100, costLimit: 10_000) { $0.count }
/// ```
public final class MemoryStore<Key: Hashable & Sendable, Value: Sendable>: Store, Sendable {
    /// The maximum number of entries; `nil` for no limit.
    public let countLimit: Int?
    /// The maximum total cost; `nil` for no limit.
    public let costLimit: Int?
    private let cost: @Sendable (Value) -> Int
    private let state: Locked<LRUList<Key, Cached<Value>>>

    /// Creates an empty store.
    /// - Parameters:
    ///   - countLimit: the most entries kept; the least recently used are evicted beyond it.
    ///   - costLimit: the most total cost kept; an entry costlier than the whole limit is not kept.
    ///   - cost: the cost of one value (for example its byte count); every value costs 0 by default.
    public init(countLimit: Int? = nil, costLimit: Int? = nil, cost: @escaping @Sendable (Value) -> Int = { _ in 0 }) {
        precondition(countLimit.map { $0 > 0 } ?? true, "countLimit must be positive")
        precondition(costLimit.map { $0 >= 0 } ?? true, "costLimit must not be negative")
        self.countLimit = countLimit
        self.costLimit = costLimit
        self.cost = cost
        self.state = Locked(LRUList())
    }

    public var origin: Origin { .memory }

    public func retrieve(_ key: Key) async throws -> Cached<Value>? {
        state.withLock { $0.touch(key) }
    }

    public func insert(_ entry: Cached<Value>, for key: Key) async throws {
        let entryCost = max(0, cost(entry.value))
        state.withLock { list in
            if let costLimit, entryCost > costLimit {
                // Keeping it would evict everything else and still break the limit: drop it instead,
                // together with the now-outdated previous value for the key.
                list.remove(key)
                return
            }
            list.upsert(key, entry, cost: entryCost)
            while let countLimit, list.count > countLimit { list.removeLeastRecent() }
            while let costLimit, list.totalCost > costLimit { list.removeLeastRecent() }
        }
    }

    public func delete(_ key: Key) async throws {
        state.withLock { $0.remove(key) }
    }

    /// Re-stamps the entry in place under the lock (the value is not copied or re-costed) and marks
    /// it most recently used.
    public func refresh(_ key: Key, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        state.withLock { list in
            list.update(key) { entry in
                entry.storedAt = storedAt
                entry.validators = validators
            }
        }
    }

    /// Removes every entry under the lock; the count and cost limits count from zero again.
    public func removeAll() async throws {
        state.withLock { $0 = LRUList() }
    }

    /// The number of entries held.
    public var count: Int { state.withLock { $0.count } }

    /// The total cost of the entries held.
    public var totalCost: Int { state.withLock { $0.totalCost } }

    /// The keys from most to least recently used (for tests and diagnostics).
    public var keysByRecency: [Key] { state.withLock { $0.keysByRecency() } }
}

extension MemoryStore: CustomStringConvertible {
    public var description: String { "MemoryStore" }
}

/// An LRU list over slot indices. Slot 0 is never used; index 0 means "none".
struct LRUList<Key: Hashable & Sendable, Element: Sendable>: Sendable {
    struct Slot: Sendable {
        var key: Key
        var element: Element
        var cost: Int
        var previous: Int
        var next: Int
    }

    private var slots: [Slot?] = [nil]
    private var free: [Int] = []
    private var index: [Key: Int] = [:]
    private var head = 0  // most recent
    private var tail = 0  // least recent
    private(set) var totalCost = 0

    var count: Int { index.count }

    /// The element for `key`, marking it most recently used.
    mutating func touch(_ key: Key) -> Element? {
        guard let position = index[key] else { return nil }
        moveToFront(position)
        return slots[position]!.element
    }

    /// Changes the element for `key` in place, marking it most recently used; `false` when absent.
    mutating func update(_ key: Key, _ change: (inout Element) -> Void) -> Bool {
        guard let position = index[key] else { return false }
        change(&slots[position]!.element)
        moveToFront(position)
        return true
    }

    mutating func upsert(_ key: Key, _ element: Element, cost: Int) {
        if let position = index[key] {
            totalCost += cost - slots[position]!.cost
            slots[position]!.element = element
            slots[position]!.cost = cost
            moveToFront(position)
            return
        }
        let slot = Slot(key: key, element: element, cost: cost, previous: 0, next: head)
        let position: Int
        if let reused = free.popLast() {
            position = reused
            slots[position] = slot
        } else {
            position = slots.count
            slots.append(slot)
        }
        if head != 0 { slots[head]!.previous = position }
        head = position
        if tail == 0 { tail = position }
        index[key] = position
        totalCost += cost
    }

    mutating func remove(_ key: Key) {
        guard let position = index[key] else { return }
        unlink(position)
        totalCost -= slots[position]!.cost
        slots[position] = nil
        free.append(position)
        index[key] = nil
    }

    mutating func removeLeastRecent() {
        guard tail != 0 else { return }
        remove(slots[tail]!.key)
    }

    /// The least recently used key, if any.
    var leastRecentKey: Key? { tail == 0 ? nil : slots[tail]!.key }

    /// The element for `key`, without changing its recency.
    func peek(_ key: Key) -> Element? { index[key].map { slots[$0]!.element } }

    /// Every entry from least to most recently used: upserting them in this order rebuilds the list.
    func entriesFromLeastRecent() -> [(key: Key, element: Element, cost: Int)] {
        var entries: [(key: Key, element: Element, cost: Int)] = []
        entries.reserveCapacity(count)
        var position = tail
        while position != 0 {
            let slot = slots[position]!
            entries.append((slot.key, slot.element, slot.cost))
            position = slot.previous
        }
        return entries
    }

    func keysByRecency() -> [Key] {
        var keys: [Key] = []
        var position = head
        while position != 0 {
            keys.append(slots[position]!.key)
            position = slots[position]!.next
        }
        return keys
    }

    private mutating func moveToFront(_ position: Int) {
        guard head != position else { return }
        unlink(position)
        slots[position]!.previous = 0
        slots[position]!.next = head
        if head != 0 { slots[head]!.previous = position }
        head = position
        if tail == 0 { tail = position }
    }

    private mutating func unlink(_ position: Int) {
        let previous = slots[position]!.previous
        let next = slots[position]!.next
        if previous != 0 { slots[previous]!.next = next } else { head = next }
        if next != 0 { slots[next]!.previous = previous } else { tail = previous }
        slots[position]!.previous = 0
        slots[position]!.next = 0
    }
}
