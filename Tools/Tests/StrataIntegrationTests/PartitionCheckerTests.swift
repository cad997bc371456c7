import Foundation
import Testing

/// The partition checker alone, on histories written by hand: it finds each kind of violation, and
/// accepts what the model allows (a read within the window, an unacknowledged write that took
/// effect or did not).
@Suite("PartitionChecker: bounded staleness and no lost write, judged from the clients' history")
struct PartitionCheckerTests {
    let checker = PartitionChecker(window: 5)

    static func write(_ version: Int, _ start: Double, _ end: Double, _ outcome: PartitionOperation.Outcome = .ok, key: String = "k") -> PartitionOperation {
        PartitionOperation(process: 0, kind: .write, key: key, node: "n1", version: version, start: start, end: end, outcome: outcome)
    }

    static func read(_ version: Int?, _ start: Double, _ end: Double, key: String = "k") -> PartitionOperation {
        PartitionOperation(process: 1, kind: .read, key: key, node: "n2", version: version, start: start, end: end,
                           outcome: version == nil ? .failed : .ok, cache: "HIT")
    }

    @Test("reads within the window of the versions they saw, failed reads and unknown writes are no violation")
    func aHistoryTheModelAllows() {
        let history = [
            Self.read(1, 0, 0.1),
            Self.write(2, 1, 1.2),
            Self.read(1, 5.9, 6.0),              // version 1 was replaced at 1.2 at the latest: 6.0 - 5 < 1.2
            Self.read(2, 1.1, 1.3),              // during its write
            Self.write(3, 2, 2.5, .unknown),     // may never take effect
            Self.read(2, 20, 20.1),              // so 2 may still be current long after
            Self.read(3, 21, 21.1),              // or 3 took effect
            Self.read(nil, 22, 30),
            Self.write(4, 40, 40.2),
            Self.read(4, 41, 41.1),
        ]
        #expect(checker.check(history, originVersions: ["k": 4]).isEmpty)
    }

    @Test("a read of a version replaced more than the window before the read began is a violation")
    func aStaleRead() {
        let violations = checker.check([Self.write(2, 1, 1.2), Self.read(1, 6.3, 6.4)])
        #expect(violations.count == 1)
        #expect(violations.first?.reason.contains("replaced by version 2") == true)
    }

    @Test("staleness: how long before each read of a replaced version the replacing write was acknowledged")
    func theStalenessFigures() {
        let history = [Self.write(2, 1, 1.2), Self.read(1, 1.0, 1.1), Self.read(1, 2.2, 2.3), Self.read(2, 3, 3.1),
                       Self.write(3, 4, 4.5, .unknown), Self.read(2, 9, 9.1)]
        #expect(checker.staleness(history) == [2.2 - 1.2], "an unknown write replaces nothing for sure")
    }

    @Test("a version read before its write began, or one no write set, is a violation")
    func aReadFromTheFuture_orFromNowhere() {
        #expect(checker.check([Self.read(2, 0, 0.5), Self.write(2, 1, 1.2)]).map(\.reason).first?.contains("before its write began") == true)
        #expect(checker.check([Self.read(7, 0, 0.5)]).map(\.reason).first?.contains("no write set") == true)
    }

    @Test("an acknowledged write the origin does not hold at the end is lost; a later unknown write may replace it")
    func aLostWrite() {
        let history = [Self.write(2, 1, 1.2), Self.write(3, 2, 2.2, .unknown), Self.write(4, 3, 3.3, .unknown)]
        #expect(checker.check(history, originVersions: ["k": 1]).map(\.reason).first?.contains("was lost") == true)
        for held in [2, 3, 4] {
            #expect(checker.check(history, originVersions: ["k": held]).isEmpty, "version \(held)")
        }
        // An unknown write before the acknowledged one, applied after it, undid it.
        let undone = [Self.write(2, 1, 1.2, .unknown), Self.write(3, 2, 2.2)]
        #expect(checker.check(undone, originVersions: ["k": 2]).count == 1)
    }

    @Test("the model's premises are checked: overlapping writes of one key, a version set twice")
    func thePremises() {
        #expect(checker.check([Self.write(2, 1, 3), Self.write(3, 2, 4)]).map(\.reason).first?.contains("overlap") == true)
        #expect(checker.check([Self.write(2, 1, 2), Self.write(2, 3, 4)]).map(\.reason).first?.contains("no other write") == true)
    }

    @Test("keys are judged apart, and a history survives its JSON file")
    func keysApart_andTheFile() throws {
        let history = [Self.write(2, 1, 1.2, key: "a"), Self.read(1, 20, 20.1, key: "b"), Self.read(2, 2, 2.1, key: "a")]
        #expect(checker.check(history).isEmpty)
        let lines = try history.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }.joined(separator: "\n")
        let decoded = try lines.split(separator: "\n").map { try JSONDecoder().decode(PartitionOperation.self, from: Data($0.utf8)) }
        #expect(decoded == history)
    }
}
