#if SQLite
import Foundation
import GRDB
import StrataSQLite
import StrataTesting
import Testing

/// SQLiteStore runs the same store contract as every other store, with every hook.
@Suite("SQLiteStore contract")
struct SQLiteStoreContractTests {
    /// Each case gets a database file of its own in a temporary directory, removed after the case.
    static let contract = StoreContract<SQLiteStore<Item>>(
        keys: ("feed", "posts/1 ' OR 1=1 --"), values: (itemA, itemB),
        reopen: { store in try SQLiteStore(path: store.path, logger: quietLogger) },
        corruption: .init(
            corrupt: { store, key in
                try rawConnection(store.path).write { db in
                    try db.execute(sql: "UPDATE \(entriesTable) SET value = X'00FF00' WHERE key = ?", arguments: [key])
                }
            },
            isStored: { store, key in try isStored(key, at: store.path) }),
        faults: .init { store, _, body in try await withEntriesTableRenamedAway(at: store.path, body) },
        makeLimitedStore: { countLimit in
            try SQLiteStore<Item>(path: try DatabaseFiles.scopedPath(), limits: .init(countLimit: countLimit), logger: quietLogger)
        }
    ) {
        try SQLiteStore<Item>(path: try DatabaseFiles.scopedPath(), logger: quietLogger)
    }

    @Test("SQLiteStore", arguments: contract.applicableCases)
    func sqliteStore(_ behaviour: StoreContractCase) async throws {
        try await DatabaseFiles.withScope {
            try await Self.contract.verify(behaviour)
        }
    }

    @Test("every hook is given, so every case applies")
    func everyCaseApplies() {
        #expect(Self.contract.applicableCases == StoreContractCase.allCases)
    }

    @Test("verifyAll passes")
    func verifyAll() async throws {
        try await DatabaseFiles.withScope {
            try await Self.contract.verifyAll()
        }
    }
}
#endif
