#if Postgres
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
@testable import StrataPostgres
import StrataTesting
import Testing

/// Nothing listens on TCP port 1 of the loopback interface: connecting is refused at once.
let unreachableURL = "postgres://strata:pw-7f3a-unreachable@127.0.0.1:1/strata"

/// The parts that need no server: names, URLs, and a database that is not there.
@Suite("PostgresStore without a server")
struct PostgresStoreOfflineTests {
    /// Long enough that no test here can end on the store's connect timeout by accident.
    static let longConnectTimeout: Duration = .seconds(600)
    /// "Fails fast": under PostgresNIO's own 60 s, with room for a loaded run (the whole test process
    /// was once seen to stall ~35 s at the start of a CI run). Milliseconds when idle.
    static let failsFastBound: Duration = .seconds(55)

    @Test("a table name that is not a plain identifier is rejected before any SQL runs", arguments: [
        #"cache"; DROP TABLE users; --"#, "cache name", "1cache", "", "public.cache", "naïve",
        "cache\"", "cache'", String(repeating: "a", count: 49),
    ])
    func tableNameInjectionRejected(_ name: String) throws {
        let error = try #require(throws: StoreError.self, "table name \(String(reflecting: name)) was accepted") {
            try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(table: name, logger: quietLogger))
        }
        #expect(error.operation == .open)
        #expect(error.reason.contains("not a plain identifier"))
        #expect(!error.description.contains("pw-7f3a"))
    }

    @Test("plain identifiers are accepted as table names", arguments: [
        "strata_cache", "_cache", "Cache2", String(repeating: "a", count: 48),
    ])
    func plainTableNamesAccepted(_ name: String) async throws {
        let store = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(table: name, logger: quietLogger))
        #expect(store.table == name)
        await store.shutdown()
    }

    @Test("a URL becomes a configuration; the description names host, port, database and table only")
    func urlParsing() async throws {
        let store = try PostgresStore<Item>(
            url: "postgresql://app%40corp:p%2Fss-w0rd@db.internal:6543/cache?sslmode=disable",
            options: PostgresStoreOptions(table: "feeds", logger: quietLogger))
        #expect(store.description == "PostgresStore(db.internal:6543/cache/feeds)")
        #expect(store.origin == .sharedCache)
        await store.shutdown()

        let configuration = try PostgresURL.configuration(from: "postgres://app%40corp:p%2Fss-w0rd@db.internal/cache")
        #expect(configuration.username == "app@corp")
        #expect(configuration.password == "p/ss-w0rd")
        #expect(configuration.host == "db.internal")
        #expect(configuration.port == 5432)
        #expect(configuration.database == "cache")

        let defaults = try PostgresStore<Item>(url: "postgres://app@[::1]", options: PostgresStoreOptions(logger: quietLogger))
        #expect(defaults.description == "PostgresStore([::1]:5432/app/strata_cache)")
        await defaults.shutdown()
    }

    @Test("a URL it cannot use is an open error that does not show the password", arguments: [
        "mysql://u:hunter2-secret@h/db", "postgres://:hunter2-secret@h/db", "postgres://u:hunter2-secret@/db",
        "postgres://u:hunter2-secret@h/db/extra", "postgres://u:hunter2-secret@h/db?sslmode=sometimes", "not a url",
        // Found by fuzzing (strata-fuzz postgres-url): without a scheme, Foundation reads a relative
        // reference, which the error showed as it was, password included.
        "://u:hunter2-secret@h/db/", "u:hunter2-secret@h/db", "//u:hunter2-secret@h/db", "postgres:u:hunter2-secret@h/db",
        "://u:hunter2-secret@\u{5BA}h:1/db",  // an `@` that a combining mark joins into one Character
        // Found by fuzzing: the credentials again in the path, which the URL's redaction keeps; and
        // the password in the query.
        "pgres://u:hunter2-secret@h.res://u:hunter2-secret@h.x/db", "postgres://u:hunter2-secret@h/db?sslmode=hunter2-secret",
    ])
    func badURLRejected(_ url: String) throws {
        let error = try #require(throws: StoreError.self, "\(url) was accepted") {
            try PostgresStore<Item>(url: url, options: PostgresStoreOptions(logger: quietLogger))
        }
        #expect(error.operation == .open)
        #expect(!error.description.contains("hunter2"), "\(error)")
    }

    @Test("a refused connection is a typed StoreError at once, long before the connect timeout", arguments: [
        StoreError.Operation.retrieve, .insert, .delete,
    ])
    func unreachableDatabaseFailsFast(_ operation: StoreError.Operation) async throws {
        let store = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(connectTimeout: Self.longConnectTimeout, logger: quietLogger))
        let error = try await #require(throws: StoreError.self, "\(operation) succeeded against a closed port") {
            switch operation {
            case .retrieve: _ = try await store.retrieve("feed")
            case .insert: try await store.insert(itemA, for: "feed", storedAt: Date())
            case .delete, .open, .refresh: try await store.delete("feed")
            }
        }
        #expect(error.operation == operation)
        #expect(error.key == "feed")
        #expect(error.store == "PostgresStore(127.0.0.1:1/strata/strata_cache)")
        #expect(error.reason.hasPrefix("database unreachable at 127.0.0.1:1: "), "\(error.reason)")
        #expect(error.reason.lowercased().contains("connection refused"), "\(error.reason)")
        // The cause is typed, from PostgresNIO's error of the store's own connection attempt.
        let failure = error.underlying as? PostgresConnectionError
        #expect(failure?.cause == .refused, "\(String(describing: error.underlying))")
        #expect(failure?.address == "127.0.0.1:1")
        #expect(failure?.error?.code == .connectionError)
        // PostgresNIO's pool alone keeps a lease waiting 60 s (until its circuit breaker trips), and
        // the connect timeout is 10 minutes. A `PostgresConnectionError` whose cause is `.refused`
        // comes only from the store's own attempt (the pool's failure would be a `PSQLError`, and the
        // connect timeout's `.unreachable`): the store failed on it, not on a timeout. No wall-clock
        // bound: on a loaded machine it measures the machine.
    }

    @Test("fallback(to:) serves the next tier when the database is unreachable")
    func fallbackServesAnotherTier() async throws {
        let store = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(connectTimeout: Self.longConnectTimeout, logger: quietLogger))
        let feed = store.loader(key: "feed", freshness: .any)
            .fallingBack(to: ClosureLoader { itemUnicode })
        let value = try await feed.load()
        #expect(value == itemUnicode)

        // The failure the fallback absorbed was the store's, unreadable rather than empty, and found
        // by the store's own connection attempt (refused), not by waiting out a timeout.
        await #expect {
            try await store.loader(key: "feed", freshness: .any).load()
        } throws: { error in
            guard case CacheLoadError.unreadable(_, "feed", let underlying) = error, let failure = underlying as? StoreError else {
                return false
            }
            return failure.reason.hasPrefix("database unreachable") && (failure.underlying as? PostgresConnectionError)?.cause == .refused
        }
    }

    @Test("credentials appear in neither the description, the errors nor the logs")
    func credentialsAbsentWhenUnreachable() async throws {
        let logs = LogCapture()
        let store = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(connectTimeout: Self.longConnectTimeout, logger: logs.logger))
        await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
        let error = await #expect(throws: StoreError.self) { try await store.insert(itemA, for: "feed", storedAt: Date()) }
        #expect(!store.description.contains("pw-7f3a"))
        let errorText = String(describing: error) + String(reflecting: error?.underlying)
        #expect(!errorText.contains("pw-7f3a"))
        // The pool's own account of the refused connections is forwarded (at debug), without the password.
        #expect(logs.entries.contains { $0.level == .debug && $0.message == "Connection creation failed" })
        #expect(!logs.entries.contains { $0.level > .debug })
        for entry in logs.entries {
            #expect(!entry.line().contains("pw-7f3a"), "\(entry.line())")
        }
    }

    @Test("a server that accepts connections but never answers is a StoreError after connectTimeout")
    func silentServerTimesOut() async throws {
        let server = try SilentServer()
        let store = try PostgresStore<Item>(
            url: "postgres://strata:pw@127.0.0.1:\(server.port)/strata",
            options: PostgresStoreOptions(connectTimeout: .seconds(1), logger: quietLogger))
        let clock = ContinuousClock()
        let started = clock.now
        let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
        let elapsed = started.duration(to: clock.now)
        // The store's watchdog and PostgresNIO's own connect timeout (set to the same second) race;
        // either way the reason says the database is unreachable, and why.
        let prefix = "database unreachable at 127.0.0.1:\(server.port): "
        #expect(
            [prefix + "no connection within 1 s", prefix + "Connect timeout (1 s)"].contains(error?.reason),
            "\(String(describing: error))")
        #expect((error?.underlying as? PostgresConnectionError)?.cause == .unreachable)
        #expect(elapsed >= .seconds(1) && elapsed < Self.failsFastBound, "took \(elapsed)")
        await store.shutdown()
    }

    @Test("a wait for the watchdog's answer never outlives the probes: when the probe it could have joined has just ended, it returns so that its caller starts another", .timeLimit(.minutes(3)))
    func aWaitForTheWatchdog_afterItsProbeEnded_returns() async throws {
        let store = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(connectTimeout: Self.longConnectTimeout, logger: quietLogger))
        let watchdog = store.watchdog
        // An earlier operation's probe: started, and ended (refused) before the next operation waits.
        let earlier = ContinuousClock.now
        watchdog.probeIfNeeded(since: earlier)
        await watchdog.waitForAnswer(since: earlier)
        #expect(watchdog.failure(since: earlier)?.cause == .refused)
        // A later operation: that probe is older than it, and none is running. Before, this waited
        // for an answer no probe was getting, until the operation's connect timeout (ten minutes here).
        let later = ContinuousClock.now
        #expect(watchdog.failure(since: later) == nil)
        await watchdog.waitForAnswer(since: later)
        // Its caller then starts a probe of its own, whose answer counts.
        watchdog.probeIfNeeded(since: later)
        await watchdog.waitForAnswer(since: later)
        #expect(watchdog.failure(since: later)?.cause == .refused)
    }

    @Test("a cancelled operation ends at once with CancellationError, not a store failure")
    func cancellationEndsTheWait() async throws {
        let store = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(connectTimeout: Self.longConnectTimeout, logger: quietLogger))
        let clock = ContinuousClock()
        let started = clock.now
        let read = Task { try await store.retrieve("feed") }
        read.cancel()
        await #expect(throws: CancellationError.self) { try await read.value }
        // Milliseconds when the machine is idle; the bound only has to tell it from the connect timeout
        // and PostgresNIO's own 60 s, with room for a loaded run of the whole suite.
        #expect(started.duration(to: clock.now) < Self.failsFastBound, "a cancelled read waited for a timeout")
    }

    @Test("operations after shutdown throw instead of hanging")
    func shutdownStopsTheStore() async throws {
        let store = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(logger: quietLogger))
        await store.shutdown()
        let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
        #expect(error?.reason == "the store was shut down")
    }
}

/// A TCP socket on 127.0.0.1 that listens but never accepts: the kernel completes the handshake, and
/// then nothing is ever said. A database that hangs, rather than refuses.
final class SilentServer: Sendable {
    let port: Int
    private let descriptor: Int32

    struct Failure: Error, CustomStringConvertible {
        var call: String
        var description: String { "\(call) failed: errno \(errno)" }
    }

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(call: "socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && listen(descriptor, 16) == 0
                    && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw Failure(call: "bind/listen")
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}
#endif
