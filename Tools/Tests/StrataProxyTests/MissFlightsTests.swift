import Foundation
@testable import StrataProxy
import StrataTesting
import Testing

/// The proxy's in-process flights: one leader per key, every follower woken exactly once, by the
/// leader's end or by its own cancellation, never both; no follower left waiting on a finished key.
@Suite("MissFlights: one fetch per key in a node, every follower woken once")
struct MissFlightsTests {
    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    struct Violation: Error, CustomStringConvertible { var description: String }

    @Test("the first request leads, later ones follow, and the leader's end wakes them; the next request leads again")
    func leadFollowFinish() {
        var flights = MissFlights()
        let roles = [flights.begin("a"), flights.begin("a"), flights.begin("b"), flights.begin("a")]
        #expect(roles == [.lead, .follow(id: 1), .lead, .follow(id: 2)])
        #expect(flights.keysInFlight == 2)
        let woken = flights.finish("a")
        #expect(woken == [1, 2])
        let next = flights.begin("a")
        #expect(next == .lead)
        let none = flights.finish("b")
        #expect(none == [])
    }

    @Test("a follower that gives up is not woken; one woken already cannot give up")
    func abandon() {
        var flights = MissFlights()
        _ = flights.begin("a")
        _ = flights.begin("a")
        _ = flights.begin("a")
        let first = flights.abandon(1, key: "a")
        let again = flights.abandon(1, key: "a")
        #expect(first && !again)
        let woken = flights.finish("a")
        #expect(woken == [2])
        let late = flights.abandon(2, key: "a")
        #expect(!late)
    }

    @Test("random interleavings: one leader per key, every follower woken or withdrawn exactly once")
    func randomInterleavings() async throws {
        for seed in 0..<Self.seeds {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var random = SplitMix64(seed: seed)
            var flights = MissFlights()
            var leading: Set<String> = []
            var following: [Int: String] = [:]
            var done: Set<Int> = []
            for step in 0..<300 {
                let key = ["a", "b", "c"][Int(random.next() % 3)]
                switch random.next() % 4 {
                case 0, 1:
                    switch flights.begin(key) {
                    case .lead:
                        guard leading.insert(key).inserted else {
                            throw Violation(description: "seed \(seed) step \(step): a second leader of \(key)")
                        }
                    case .follow(let id):
                        guard leading.contains(key), following[id] == nil, !done.contains(id) else {
                            throw Violation(description: "seed \(seed) step \(step): follower \(id) of \(key) without a leader, or reused")
                        }
                        following[id] = key
                    }
                case 2:
                    guard leading.contains(key) else { continue }
                    for id in flights.finish(key) {
                        guard following[id] == key else {
                            throw Violation(description: "seed \(seed) step \(step): woke \(id), not a follower of \(key)")
                        }
                        following[id] = nil
                        done.insert(id)
                    }
                    leading.remove(key)
                default:
                    guard !following.isEmpty else { continue }
                    let id = following.keys.sorted()[Int(random.next() % UInt64(following.count))]
                    guard flights.abandon(id, key: following[id]!) else {
                        throw Violation(description: "seed \(seed) step \(step): a waiting follower \(id) could not withdraw")
                    }
                    following[id] = nil
                    done.insert(id)
                }
                // Every follower still waiting belongs to a key being fetched.
                for (id, followed) in following where !leading.contains(followed) {
                    throw Violation(description: "seed \(seed) step \(step): follower \(id) waits on \(followed), which nobody fetches")
                }
                guard flights.keysInFlight == leading.count else {
                    throw Violation(description: "seed \(seed) step \(step): \(flights.keysInFlight) keys in flight, \(leading.count) leaders")
                }
            }
        }
    }
}
