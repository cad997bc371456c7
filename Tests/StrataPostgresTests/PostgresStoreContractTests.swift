#if Postgres
import Foundation
import PostgresNIO
import Strata
@testable import StrataPostgres
import StrataTesting
import Testing

/// `PostgresStore` runs the same store contract as every other store, against a real server; each
/// case gets a table of its own, dropped afterwards.
@Suite("PostgresStore contract", .enabled(if: TestServer.isAvailable, TestServer.skipReason))
struct PostgresStoreContractTests {
    static let contract = StoreContract<PostgresStore<Item>>(
        keys: ("feed", "posts/1' OR '1'='1"), values: (itemA, itemUnicode),
        // A second store with its own connection pool on the same table: another process, as far
        // as the database can tell.
        reopen: { store in try TestScope.store(Item.self, table: store.table) },
        corruption: .init(
            corrupt: { store, key in
                try await Admin.require().execute(
                    #"UPDATE "\#(unescaped: store.table)" SET value = convert_to('garbage', 'UTF8'), size = 7 WHERE key = \#(key)"#)
            },
            isStored: { store, key in try await Admin.require().rowCount(in: store.table, key: key) > 0 }),
        // A real fault: another session renames the table away while the operation runs, so the
        // server rejects the store's statement; renamed back afterwards, whatever happened.
        faults: .init(inject: { store, _, body in
            let admin = try Admin.require()
            let away = store.table + "_away"
            try await admin.execute(#"ALTER TABLE "\#(unescaped: store.table)" RENAME TO "\#(unescaped: away)""#)
            let failure: (any Error)?
            do {
                try await body()
                failure = nil
            } catch {
                failure = error
            }
            try await admin.execute(#"ALTER TABLE "\#(unescaped: away)" RENAME TO "\#(unescaped: store.table)""#)
            if let failure { throw failure }
        })
    ) {
        try TestScope.store(Item.self, table: TestScope.table())
    }

    @Test("every applicable case", arguments: contract.applicableCases)
    func contractCase(_ behaviour: StoreContractCase) async throws {
        try await TestScope.run {
            try await Self.contract.verify(behaviour)
        }
    }

    @Test("verifyAll passes with every hook given")
    func verifyAll() async throws {
        // Every case but the count-limit ones: a shared cache table has no entry limit.
        #expect(Self.contract.applicableCases == StoreContractCase.cases(with: [.reopen, .corruption, .faults]))
        #expect(Self.contract.applicableCases.contains(.concurrentMixedOperationsLoseNothing))
        try await TestScope.run {
            try await Self.contract.verifyAll()
        }
    }
}
#endif
