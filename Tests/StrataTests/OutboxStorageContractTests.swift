import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Every outbox storage runs the same contract, unchanged.
@Suite("Outbox storage contract")
struct OutboxStorageContractTests {
    static let memory = OutboxStorageContract { MemoryOutboxStorage() }

    @Test("MemoryOutboxStorage", arguments: memory.applicableCases)
    func memoryStorage(_ behaviour: OutboxStorageContractCase) async throws {
        try await Self.memory.verify(behaviour)
    }

    static func fileName(_ id: UUID) -> String { "\(id.uuidString.lowercased()).\(FileOutboxStorage.fileExtension)" }

    /// Real files in a directory of each case's own.
    static let file = OutboxStorageContract<FileOutboxStorage>(
        reopen: { storage in FileOutboxStorage(directory: storage.directory, logger: quietLogger) },
        corruption: .init(
            corrupt: { storage, id in
                try Data("garbage".utf8).write(to: storage.directory.appendingPathComponent(fileName(id)))
            },
            isSetAside: { storage, id in
                let aside = storage.directory.appendingPathComponent(fileName(id) + ".unreadable")
                return (try? Data(contentsOf: aside)) == Data("garbage".utf8)
            })
    ) {
        FileOutboxStorage(directory: try TemporaryDirectory.scoped(), logger: quietLogger)
    }

    @Test("FileOutboxStorage", arguments: file.applicableCases)
    func fileStorage(_ behaviour: OutboxStorageContractCase) async throws {
        try await TemporaryDirectory.withScope {
            try await Self.file.verify(behaviour)
        }
    }

    @Test("the file storage runs every case")
    func fileRunsEverything() {
        #expect(Self.file.applicableCases == OutboxStorageContractCase.allCases)
    }

    @Test("a storage that breaks the contract fails it, naming the case and the field", arguments: [
        (Breakage.dropsReplacements, OutboxStorageContractCase.saveReplacesTheEntryWithItsID, "attempts"),
        (.losesQueuedAt, .everyFieldRoundTrips, "queuedAt"),
        (.losesConcurrentSaves, .concurrentSavesLoseNothing, "missing"),
        (.refusesMissingRemoves, .removeOfAMissingIDSucceeds, "remove of"),
    ])
    func brokenStorageFails(_ breakage: Breakage, _ behaviour: OutboxStorageContractCase, _ named: String) async throws {
        let contract = OutboxStorageContract { BrokenOutboxStorage(breakage) }
        do {
            try await contract.verify(behaviour)
            Issue.record("\(breakage) passed \(behaviour)")
        } catch let violation as OutboxStorageContractViolation {
            #expect(violation.contractCase == behaviour)
            #expect(violation.message.contains(named), "\(violation)")
        }
        await #expect(throws: OutboxStorageContractViolations.self) { try await contract.verifyAll() }
    }

    @Test("a case that needs a hook the contract lacks fails, naming the hook")
    func missingHookFails() async throws {
        await #expect {
            try await Self.memory.verify(.secondInstanceSeesSavesAndRemovals)
        } throws: { error in
            "\(error)".contains("`reopen` hook")
        }
    }
}

enum Breakage: Sendable {
    case dropsReplacements, losesQueuedAt, losesConcurrentSaves, refusesMissingRemoves
}

/// A memory storage with one defect.
final class BrokenOutboxStorage: OutboxStorage {
    let breakage: Breakage
    private let entries = Locked<[UUID: OutboxEntry]>([:])
    private let saves = Locked(0)

    init(_ breakage: Breakage) { self.breakage = breakage }

    func loadAll() async throws -> [OutboxEntry] { entries.withLock { Array($0.values) } }

    func save(_ entry: OutboxEntry) async throws {
        var entry = entry
        switch breakage {
        case .dropsReplacements where entries.withLock({ $0[entry.id] != nil }):
            return
        case .losesQueuedAt:
            entry.queuedAt = entry.createdAt
        case .losesConcurrentSaves:
            // Every fifth save is acknowledged and not kept.
            if saves.withLock({ count in count += 1; return count.isMultiple(of: 5) }) { return }
        default:
            break
        }
        entries.withLock { $0[entry.id] = entry }
    }

    func remove(_ id: UUID) async throws {
        let removed = entries.withLock { $0.removeValue(forKey: id) }
        if removed == nil, breakage == .refusesMissingRemoves {
            throw StoreError(store: "BrokenOutboxStorage", operation: .delete, key: id.uuidString, reason: "no such entry")
        }
    }
}
