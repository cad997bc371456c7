import Testing
@testable import Strata
import StrataTesting

@Suite("MemoryStore")
struct MemoryStoreTests {
    @Test func countLimit_evictsAnEntryNotReadBeforeOneThatWas() async throws {
        let sut = MemoryStore<String, Int>(countLimit: 2)
        try await sut.insert(1, for: "a", storedAt: referenceDate)
        try await sut.insert(2, for: "b", storedAt: referenceDate)
        _ = try await sut.retrieve("a")  // "b" is now the least recently used
        try await sut.insert(3, for: "c", storedAt: referenceDate)

        #expect(try await sut.retrieve("b") == nil)
        #expect(try await sut.retrieve("a")?.value == 1)
        #expect(try await sut.retrieve("c")?.value == 3)
        #expect(sut.count == 2)
    }

    @Test func costLimit_evictsUntilTheTotalFits() async throws {
        let sut = MemoryStore<String, [Int]>(costLimit: 10) { $0.count }
        try await sut.insert(Array(repeating: 0, count: 4), for: "a", storedAt: referenceDate)
        try await sut.insert(Array(repeating: 0, count: 4), for: "b", storedAt: referenceDate)
        try await sut.insert(Array(repeating: 0, count: 5), for: "c", storedAt: referenceDate)

        #expect(sut.keys == ["c", "b"])
        #expect(sut.totalCost == 9)
    }

    @Test func entryCostlierThanTheWholeLimit_isNotKeptAndDropsTheOutdatedValue() async throws {
        let sut = MemoryStore<String, [Int]>(costLimit: 3) { $0.count }
        try await sut.insert([1], for: "a", storedAt: referenceDate)
        try await sut.insert([1], for: "big", storedAt: referenceDate)
        try await sut.insert([1, 2, 3, 4], for: "big", storedAt: referenceDate)

        #expect(try await sut.retrieve("big") == nil)
        #expect(try await sut.retrieve("a")?.value == [1])
        #expect(sut.totalCost == 1)
    }

    @Test func replacingAnEntry_updatesItsCost() async throws {
        let sut = MemoryStore<String, [Int]>(countLimit: 3, costLimit: 100) { $0.count }
        try await sut.insert([1, 2, 3], for: "a", storedAt: referenceDate)
        try await sut.insert([1], for: "b", storedAt: referenceDate)
        try await sut.insert([1], for: "a", storedAt: referenceDate)

        #expect(sut.totalCost == 2)
        #expect(sut.keys == ["a", "b"])
    }

    @Test func slotsAreReusedAfterDeletes() async throws {
        let sut = MemoryStore<Int, Int>(countLimit: 3)
        for round in 0..<1_000 {
            try await sut.insert(round, for: round, storedAt: referenceDate)
            if round.isMultiple(of: 3) { try await sut.delete(round) }
        }
        // 999 was inserted (evicting 995) and then deleted.
        #expect(sut.count == 2)
        #expect(sut.keys == [998, 997])
    }

    @Test func removeAll_emptiesTheStore() async throws {
        let sut = MemoryStore<String, Int>()
        try await sut.insert(1, for: "a", storedAt: referenceDate)
        try await sut.removeAll()
        #expect(sut.count == 0)
        #expect(try await sut.retrieve("a") == nil)
    }

    @Test func concurrentUse_keepsTheListConsistent() async throws {
        let sut = MemoryStore<Int, Int>(countLimit: 50)
        await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for step in 0..<500 {
                        let key = (worker * 31 + step) % 120
                        switch step % 3 {
                        case 0: try await sut.insert(step, for: key, storedAt: referenceDate)
                        case 1: _ = try await sut.retrieve(key)
                        default: try await sut.delete(key)
                        }
                    }
                }
            }
        }
        #expect(sut.count <= 50)
        #expect(sut.keys.count == sut.count)
        #expect(sut.totalCost == 0)
    }

    @Test func aReadEntry_getsASecondChance_thenGoesWhenNotReadAgain() async throws {
        let sut = MemoryStore<String, Int>(countLimit: 3)
        for key in ["a", "b", "c"] { try await sut.insert(0, for: key, storedAt: referenceDate) }
        _ = try await sut.retrieve("a")
        _ = try await sut.retrieve("b")

        try await sut.insert(0, for: "d", storedAt: referenceDate)  // the hand clears a and b, evicts c
        #expect(sut.keys == ["a", "b", "d"])

        _ = try await sut.retrieve("b")
        _ = try await sut.retrieve("d")
        try await sut.insert(0, for: "e", storedAt: referenceDate)  // a was not read since its second chance: it goes
        #expect(sut.keys == ["b", "d", "e"])
    }

    @Test func theEntryBeingInserted_isNeverItsOwnVictim() async throws {
        let sut = MemoryStore<String, Int>(costLimit: 10) { $0 }
        try await sut.insert(4, for: "a", storedAt: referenceDate)
        try await sut.insert(4, for: "b", storedAt: referenceDate)
        try await sut.delete("a")  // frees the slot the hand points at
        try await sut.insert(7, for: "c", storedAt: referenceDate)  // reuses it and goes over the limit

        #expect(sut.keys == ["c"])
        #expect(try await sut.retrieve("c")?.value == 7)
        #expect(sut.totalCost == 7)
    }

    @Test func immediateEntry_readsSynchronouslyLikeRetrieve() async throws {
        let sut = MemoryStore<String, Int>(countLimit: 2)
        try await sut.insert(1, for: "a", storedAt: referenceDate)
        try await sut.insert(2, for: "b", storedAt: referenceDate)
        #expect(sut.immediateEntry(for: "a")?.value == 1)
        #expect(sut.immediateEntry(for: "zzz") == nil)
        try await sut.insert(3, for: "c", storedAt: referenceDate)  // "a" was read: "b" goes
        #expect(sut.keys == ["a", "c"])
    }

    @Test func reportsMemoryOrigin() {
        #expect(MemoryStore<String, Int>().origin == .memory)
    }
}
