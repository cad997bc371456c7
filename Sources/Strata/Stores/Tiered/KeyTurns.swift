/// Whose turn it is to change a key's entry in a ``TieredStore``'s memory tier: one change per
/// key at a time, in the order they asked (a local write, a fill from the shared tier, another
/// node's change). Each change decides and acts within its turn, so a decision ("the memory tier
/// holds nothing newer", "no local write is on its way") still holds when it acts on it.
///
/// Pure: no tasks. The store keeps the continuations of the changes that wait.
struct KeyTurns<Key: Hashable & Sendable>: Sendable {
    typealias Ticket = UInt64

    /// Each key's tickets in order; the first one holds the turn.
    private(set) var queues: [Key: [Ticket]] = [:]
    private var last: Ticket = 0

    /// A change of `key` asks for its turn: its ticket, and whether it holds the turn now.
    mutating func request(_ key: Key) -> (ticket: Ticket, holds: Bool) {
        last += 1
        queues[key, default: []].append(last)
        return (last, queues[key]!.count == 1)
    }

    /// Whether `ticket` holds `key`'s turn.
    func holds(_ key: Key, _ ticket: Ticket) -> Bool { queues[key]?.first == ticket }

    /// Whether `ticket` still holds or waits for `key`'s turn.
    func isQueued(_ key: Key, _ ticket: Ticket) -> Bool { queues[key]?.contains(ticket) ?? false }

    /// The holder `ticket` is done: the ticket that holds the turn next, if any waits.
    mutating func finish(_ key: Key, _ ticket: Ticket) -> Ticket? {
        guard var queue = queues[key], queue.first == ticket else { return nil }
        queue.removeFirst()
        queues[key] = queue.isEmpty ? nil : queue
        return queue.first
    }

    /// A waiting `ticket` stops waiting (its task was cancelled); `false` when it holds the turn
    /// or is not queued (it must then finish, or was never there).
    mutating func withdraw(_ key: Key, _ ticket: Ticket) -> Bool {
        guard var queue = queues[key], let index = queue.firstIndex(of: ticket), index > 0 else { return false }
        queue.remove(at: index)
        queues[key] = queue
        return true
    }
}
