/// Used by `FileStoreIndex` for a limited FileStore's least-recently-used order.
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
