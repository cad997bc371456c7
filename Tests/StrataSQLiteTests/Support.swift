#if SQLite
import Foundation
import GRDB
import Logging
@_spi(StrataInternals) import Strata
import StrataSQLite
// Every file of this target uses `Item`: imported once, for the whole target.
@_exported import StrataFixtures
import StrataTesting

/// The entries table, as tests inspect and damage it from their own connection.
let entriesTable = SQLiteStore<Item>.tableName

/// A second, plain connection to a store's file: what another process (or another SQLite tool) sees.
func rawConnection(_ path: String, allowsOpenTransactions: Bool = false) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.busyMode = .timeout(5)
    configuration.allowsUnsafeTransactions = allowsOpenTransactions
    return try DatabaseQueue(path: path, configuration: configuration)
}

/// Whether a row exists for `key`, read through a connection of its own.
func isStored(_ key: String, at path: String) throws -> Bool {
    try rawConnection(path).read { db in
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(entriesTable) WHERE key = ?", arguments: [key]) == 1
    }
}

/// Keys in the table, least recently accessed first.
func keysByAccess(at path: String) throws -> [String] {
    try rawConnection(path).read { db in
        try String.fetchAll(db, sql: "SELECT key FROM \(entriesTable) ORDER BY last_access")
    }
}

/// Makes every operation on the store at `path` fail for real while `body` runs: another connection
/// renames the entries table away (as a disk-full or schema change would surface: an SQLite error in
/// the store's own statements) and renames it back afterwards, whatever `body` did.
func withEntriesTableRenamedAway(at path: String, _ body: @Sendable () async throws -> Void) async throws {
    let connection = try rawConnection(path)
    try await connection.write { db in try db.execute(sql: "ALTER TABLE \(entriesTable) RENAME TO \(entriesTable)_away") }
    let outcome: Result<Void, any Error>
    do {
        try await body()
        outcome = .success(())
    } catch {
        outcome = .failure(error)
    }
    try await connection.write { db in try db.execute(sql: "ALTER TABLE \(entriesTable)_away RENAME TO \(entriesTable)") }
    try outcome.get()
}

/// Database files of their own for each test or contract case, removed when the scope ends.
enum DatabaseFiles {
    @TaskLocal static var scope: Locked<[TemporaryDirectory]>?

    /// A path for a new database file in a new directory that lives until ``withScope(_:)`` ends.
    static func scopedPath() throws -> String {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite")
        scope?.withLock { $0.append(directory) }
        return directory.appending("cache.sqlite").path
    }

    /// Runs `body`; every directory made by ``scopedPath()`` inside it is removed afterwards.
    static func withScope(_ body: () async throws -> Void) async throws {
        let directories = Locked<[TemporaryDirectory]>([])
        defer { directories.withLock { $0.forEach { $0.remove() }; $0 = [] } }
        try await $scope.withValue(directories) { try await body() }
    }
}

/// Fails to encode one poisoned value and decodes everything as JSON: a real codec failure.
struct PoisonableCodec: Codec {
    static let poison = Item(id: -1, name: "poison")

    struct Poisoned: Error {}

    func encode(_ value: Item) throws -> Data {
        if value == Self.poison { throw Poisoned() }
        return try JSONEncoder().encode(value)
    }

    func decode(_ data: Data) throws -> Item {
        try JSONDecoder().decode(Item.self, from: data)
    }
}

/// Deterministic bytes (a 64-bit LCG), so a "random bytes" file is the same on every run.
func pseudoRandomBytes(count: Int, seed: UInt64) -> Data {
    var state = seed
    var bytes = Data(capacity: count)
    for _ in 0..<count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        bytes.append(UInt8(truncatingIfNeeded: state >> 33))
    }
    return bytes
}
#endif
