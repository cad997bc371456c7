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
        keys: ("feed", "posts/1' OR '1'='1"), values: (itemA, itemB),
        // A second store with its own connection pool on the same table: another process, as far
        // as the database can tell.
        reopen: { store in try TestScope.store(Item.self, table: store.table) },
        corruption: .init(
            corrupt: { store, key in
                try await Admin.require().execute(
                    #"UPDATE "\#(unescaped: store.table)" SET value = convert_to('garbage', 'UTF8'), size = 7 WHERE key = \#(key)"#)
            },
            isStored: { store, key in try await Admin.require().rowCount(in: store.table, key: key) > 0 })
    ) {
        try TestScope.store(Item.self, table: TestScope.table())
    }

    @Test("every case", arguments: StoreContractCase.allCases)
    func contractCase(_ behaviour: StoreContractCase) async throws {
        try await TestScope.run {
            try await Self.contract.verify(behaviour)
        }
    }

    @Test("verifyAll passes with every hook given")
    func verifyAll() async throws {
        #expect(Self.contract.applicableCases == StoreContractCase.allCases)
        try await TestScope.run {
            try await Self.contract.verifyAll()
        }
    }
}
