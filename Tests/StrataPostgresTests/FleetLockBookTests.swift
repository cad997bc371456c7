#if Postgres
import Foundation
import Testing
@testable import StrataPostgres
import StrataTesting

/// `FleetLockBook`, the decisions of a `PostgresFleetLock`, without a database: examples, then
/// seeded random interleavings that check after every step that no key has two holders in this
/// process and that a release never frees a lock someone else took.
@Suite("FleetLockBook: one local holder per key, and a lost connection's locks are gone")
struct FleetLockBookTests {
    @Test func aSecondLocalRequest_isBusyWithoutAskingTheDatabase() {
        var book = FleetLockBook()
        guard case .ask(let token, 0) = book.tryRequested("k") else { Issue.record("asks"); return }
        let whileAsking = book.tryRequested("k")
        #expect(whileAsking == .busy)
        let held = book.answered("k", token: token, granted: true)
        #expect(held)
        let whileHeld = book.tryRequested("k")
        #expect(whileHeld == .busy)
        let release = book.released("k", token: token)
        #expect(release == .unlock(connection: 0))
        guard case .ask = book.tryRequested("k") else { Issue.record("free again"); return }
    }

    @Test func aLostConnection_takesItsLocks_andTheirLateReleaseFreesNothing() {
        var book = FleetLockBook()
        guard case .ask(let old, 0) = book.tryRequested("k") else { Issue.record("asks"); return }
        let oldHeld = book.answered("k", token: old, granted: true)
        #expect(oldHeld)
        book.connectionLost(0)
        #expect(book.held.isEmpty)
        guard case .ask(let new, 1) = book.tryRequested("k") else { Issue.record("asks on the next connection"); return }
        let newHeld = book.answered("k", token: new, granted: true)
        #expect(newHeld)
        let lateRelease = book.released("k", token: old)
        #expect(lateRelease == .nothing, "the dead holder's release")
        #expect(book.held["k"]?.token == new)
    }

    @Test func aGrantOnALostConnection_isNoLock() {
        var book = FleetLockBook()
        guard case .ask(let token, 0) = book.tryRequested("k") else { Issue.record("asks"); return }
        book.connectionLost(0)
        let held = book.answered("k", token: token, granted: true)
        #expect(!held)
        #expect(book.held.isEmpty && book.asking.isEmpty)
    }

    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    @Test("random interleavings of requests, answers, releases and lost connections keep one holder per key")
    func randomInterleavings() async throws {
        struct Violation: Error, CustomStringConvertible { var description: String }
        for seed in 0..<Self.seeds {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var random = SplitMix64(seed: seed)
            var book = FleetLockBook()
            // The database: which connection holds each key (session locks die with it).
            var database: [String: UInt64] = [:]
            var questions: [(key: String, token: UInt64, connection: UInt64)] = []
            var holders: [(key: String, token: UInt64)] = []
            let keys = ["a", "b"]
            for step in 0..<300 {
                let key = keys[Int(random.next() % 2)]
                switch random.next() % 5 {
                case 0:
                    if case .ask(let token, let connection) = book.tryRequested(key) { questions.append((key, token, connection)) }
                case 1 where !questions.isEmpty:
                    let q = questions.remove(at: Int(random.next() % UInt64(questions.count)))
                    // The database grants a key no other connection holds, and re-grants to the
                    // connection that holds it (session locks are re-entrant).
                    let alive = q.connection == book.connection
                    let granted = alive && (database[q.key] == nil || database[q.key] == q.connection)
                    if granted { database[q.key] = q.connection }
                    if book.answered(q.key, token: q.token, granted: granted) { holders.append((q.key, q.token)) }
                case 2 where !holders.isEmpty:
                    let h = holders.remove(at: Int(random.next() % UInt64(holders.count)))
                    if case .unlock(let connection) = book.released(h.key, token: h.token) {
                        guard database[h.key] == connection else {
                            throw Violation(description: "seed \(seed) step \(step): unlocks \(h.key) the connection does not hold")
                        }
                        database[h.key] = nil
                    }
                case 3 where random.next() % 4 == 0:
                    let lost = book.connection
                    book.connectionLost(lost)
                    database = database.filter { $0.value != lost }
                default:
                    break
                }
                // Invariants: one local holder per key, and every key the book holds is the
                // database's, on the current connection.
                let live = holders.filter { book.held[$0.key]?.token == $0.token }
                guard Set(live.map(\.key)).count == live.count else {
                    throw Violation(description: "seed \(seed) step \(step): two local holders of one key")
                }
                for (key, claim) in book.held where database[key] != claim.connection || claim.connection != book.connection {
                    throw Violation(description: "seed \(seed) step \(step): \(key) held by the book, not by its connection in the database")
                }
            }
        }
    }
}
#endif
