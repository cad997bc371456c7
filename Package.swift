// swift-tools-version: 6.2
// 6.2: `Task.immediate` (SE-0472) and package traits (SE-0450, 6.1).
import PackageDescription

// What an app gets when it depends on Strata and uses the `Strata` product: Strata and the four API
// packages it speaks (swift-log, swift-metrics, swift-distributed-tracing, swift-http-types), nothing
// else. The SQLite and PostgreSQL stores are traits the app enables on its `.package` line, and a
// dependency only a disabled trait uses is not even fetched:
//
//     .package(url: "https://github.com/strata-swift/strata", from: "1.0.0", traits: ["SQLite"]),
//
// The `strata` command, the demo server, the five example systems and the integration tests live in
// the sibling package `Tools/`, which never reaches an app's graph.
let package = Package(
    name: "Strata",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "Strata", targets: ["Strata"]),
        .library(name: "StrataOutbox", targets: ["StrataOutbox"]),
        .library(name: "StrataQueries", targets: ["StrataQueries"]),
        .library(name: "StrataSQLite", targets: ["StrataSQLite"]),
        .library(name: "StrataPostgres", targets: ["StrataPostgres"]),
        .library(name: "StrataTesting", targets: ["StrataTesting"]),
        .library(name: "StrataAsyncHTTPClient", targets: ["StrataAsyncHTTPClient"]),
        .library(name: "StrataInspector", targets: ["StrataInspector"]),
    ],
    traits: [
        .trait(
            name: "SQLite",
            description: "SQLiteStore, in the StrataSQLite product, on GRDB (many keys in one SQLite file)."
        ),
        .trait(
            name: "Postgres",
            description: "PostgresStore, in the StrataPostgres product, on PostgresNIO (a cache shared by servers)."
        ),
        .trait(
            name: "AsyncHTTPClient",
            description: "AsyncHTTPTransport, in the StrataAsyncHTTPClient product: an HTTPTransport on AsyncHTTPClient (SwiftNIO) for servers."
        ),
        .trait(
            name: "URLSession",
            description: "URLSessionHTTPClient, HTTPLoader's default transport. On Linux it loads FoundationNetworking and libcurl; a server on AsyncHTTPTransport turns it off (list its traits without .defaults)."
        ),
        .trait(
            name: "Inspector",
            description: "StrataInspector: the live queries, loads, outboxes and circuit breakers of a running app, as a page and a JSON API an app mounts in its Hummingbird server."
        ),
        .default(enabledTraits: ["URLSession"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // Only the traits use these; an app that enables neither never fetches them.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.21.0"),
        // Already in postgres-nio's graph: named so StrataPostgres can conform to `Service`.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        // Already in Hummingbird's graph: named so StrataInspector can read a request's peer address.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.63.0"),
        // Tests only (property-based tests with shrinking); a test-only dependency never reaches an app.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.0"),
    ],
    targets: [
        .target(
            name: "Strata",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // Writes queued on disk and sent when the network allows (`Outbox`), above the loaders.
        .target(
            name: "StrataOutbox",
            dependencies: [
                "Strata",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // Live state for screens (`QueryClient`, `LiveQuery`), above the loaders and the outbox.
        .target(
            name: "StrataQueries",
            dependencies: ["Strata", "StrataOutbox", .product(name: "Logging", package: "swift-log")]
        ),
        // Empty unless the `SQLite` trait is enabled.
        .target(
            name: "StrataSQLite",
            dependencies: [
                "Strata",
                "StrataOutbox",
                .product(name: "GRDB", package: "GRDB.swift", condition: .when(traits: ["SQLite"])),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Empty unless the `Postgres` trait is enabled.
        .target(
            name: "StrataPostgres",
            dependencies: [
                "Strata",
                "StrataOutbox",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Postgres"])),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Empty unless the `AsyncHTTPClient` trait is enabled.
        .target(
            name: "StrataAsyncHTTPClient",
            dependencies: [
                "Strata",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(
                    name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
            ]
        ),
        // Empty unless the `Inspector` trait is enabled.
        .target(
            name: "StrataInspector",
            dependencies: [
                "Strata",
                "StrataOutbox",
                "StrataQueries",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Inspector"])),
                // Already in Hummingbird's graph: its servers stop by graceful shutdown.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Inspector"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Inspector"])),
                // Already in Hummingbird's graph: its servers run on NIOPosix's singleton event loops,
                // which a stop lets settle before it shuts the server down.
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Inspector"])),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "StrataTesting",
            dependencies: ["Strata", "StrataOutbox", "StrataQueries", .product(name: "Logging", package: "swift-log")]
        ),
        // The value the test targets store (`Item`): one definition, in no product.
        .target(name: "StrataFixtures", path: "Tests/StrataFixtures"),

        .testTarget(
            name: "StrataTests",
            dependencies: [
                "Strata",
                "StrataOutbox",
                "StrataQueries",
                "StrataTesting",
                "StrataFixtures",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        // Run with `swift test --traits SQLite` (or `--enable-all-traits`); empty otherwise.
        .testTarget(
            name: "StrataSQLiteTests",
            dependencies: ["StrataSQLite", "Strata", "StrataOutbox", "StrataTesting", "StrataFixtures"]
        ),
        // Run with `swift test --traits Inspector` (or `--enable-all-traits`); empty otherwise.
        .testTarget(
            name: "StrataInspectorTests",
            dependencies: [
                "StrataInspector", "Strata", "StrataOutbox", "StrataQueries", "StrataTesting",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Inspector"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Inspector"])),
            ]
        ),
        // Run with `swift test --traits Postgres` and STRATA_POSTGRES_URL set; empty otherwise.
        .testTarget(
            name: "StrataPostgresTests",
            dependencies: [
                "StrataPostgres", "Strata", "StrataOutbox", "StrataTesting", "StrataFixtures",
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Postgres"])),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// SE-0461: a nonisolated `async` function runs on its caller's executor unless it says `@concurrent`.
// A memory hit asked for on the main actor is then answered on the main actor, with no hop to the
// global executor and back; the work that must not run there (blocking I/O, decoding a large body)
// is marked `@concurrent` or runs on `BlockingIOPool`.
// Every target, tests included, so no behaviour depends on which target a file is in.
for target in package.targets {
    target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]
}

// The sanitizer runs (.ci/run, scripts/fuzz.sh): `STRATA_SANITIZER=thread` or `=address` instruments
// this package's own modules, not its dependencies (whose code is not ours to check), and links the
// sanitizer's runtime into every product that contains them. So a sanitizer build reuses the plain
// build's dependencies, C code included, in the same build folder: only Strata's modules compile again.
// `address` adds libFuzzer's coverage (the fuzz targets in Tools/Fuzz are guided by it) and
// LeakSanitizer. Never set for an app: SwiftPM refuses unsafe flags in a package fetched by URL.
if let sanitizer = Context.environment["STRATA_SANITIZER"], ["thread", "address"].contains(sanitizer) {
    let coverage = sanitizer == "address" ? ["-sanitize-coverage=edge,indirect-calls,trace-cmp,inline-8bit-counters,pc-table"] : []
    for target in package.targets {
        // Coverage guides the fuzzers through the code under test, never through the tests.
        let guided = target.type == .test ? [] : coverage
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"] + guided)]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"])]
    }
}
