import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// Store security checked in a process of its own, so its umask and home directory can be hostile
/// without touching the test process: `strata-crash-writer` runs with umask 000 (anything created
/// with the default mode would be world-writable) and hostile keys passed as hexadecimal UTF-8.
@Suite("Store security in a fresh process", .timeLimit(.minutes(3)))
struct StoreSecurityProcessTests {
    static let hostileKeys = [
        "../../etc/passwd", "/etc/passwd", "..", "", "a\0b", String(repeating: "../", count: 3_400) + "x", "ключ 🔑",
        ".strata-index", "line\nbreak",
    ]

    static func hex(_ key: String) -> String {
        key.utf8.map { String(format: "%02x", $0) }.joined()
    }

    static var keyArguments: [String] { hostileKeys.flatMap { ["--key-hex", hex($0)] } }

    @Test(arguments: ["file", "file-limited"])
    func fileStoreUnderUmask000_keepsEveryFileOwnerOnlyAndInsideItsDirectory(_ kind: String) async throws {
        let sentinel = try TemporaryDirectory(prefix: "strata-security-process")
        let cache = sentinel.url.appendingPathComponent("new/cache")
        let arguments = ["--store", kind, "--path", cache.path, "--umask", "000", "--count", "3"] + Self.keyArguments
        let stderrFile = sentinel.url.deletingLastPathComponent().appendingPathComponent("\(UUID().uuidString)-stderr")
        defer { try? FileManager.default.removeItem(at: stderrFile) }
        try await TwoProcessTests.offPool { try KillLoop.runToCompletion(arguments, stderrFile: stderrFile) }

        let paths = tree(sentinel.url)
        #expect(paths.allSatisfy { $0 == "new" || $0.hasPrefix("new/cache") }, "\(paths)")
        #expect(permissions(cache.path) == 0o700)
        let files = tree(cache)
        let fillers = kind == "file-limited" ? 3 : 0  // rounds 1–3 each write one filler key
        let index = kind == "file-limited" ? 2 : 0
        // With countLimit 4 only the four most recent entries are left; without, one per key.
        #expect(files.count == (kind == "file-limited" ? 4 + index : Self.hostileKeys.count + fillers), "\(files)")
        for name in files {
            #expect(permissions(cache.appendingPathComponent(name).path) == 0o600, "\(name)")
        }

        let store = FileStore<CrashRecord>(directory: cache, logger: quietLogger)
        if kind == "file" {
            for key in Self.hostileKeys {
                let record = try await store.retrieve(key)?.value
                #expect(record?.seq == 3 && record?.defect == nil, "key \(key.debugDescription.prefix(30))")
            }
        }
    }

    @Test func sqliteStoreUnderUmask000_keepsTheDatabaseItsJournalAndItsDirectoryOwnerOnly() async throws {
        let sentinel = try TemporaryDirectory(prefix: "strata-security-process")
        let database = sentinel.url.appendingPathComponent("new/db/cache.sqlite")
        let stderrFile = sentinel.url.appendingPathComponent("stderr")
        // Killed mid-run, so the -wal and -shm files are still there to inspect.
        let point = try await TwoProcessTests.offPool {
            try KillLoop.killDuringWrite(
                ["--store", "sqlite", "--path", database.path, "--umask", "000", "--key", "feed"], afterAcks: 2, spin: .zero,
                stderrFile: stderrFile)
        }
        #expect(point.acknowledged != nil)
        let directory = database.deletingLastPathComponent()
        #expect(permissions(directory.path) == 0o700)
        let files = tree(directory)
        #expect(Set(files).isSuperset(of: ["cache.sqlite", "cache.sqlite-wal", "cache.sqlite-shm"]), "\(files)")
        for name in files {
            #expect(permissions(directory.appendingPathComponent(name).path) == 0o600, "\(name)")
        }
    }

    /// UserDefaults keys are never paths: with hostile keys, the only file the process writes under its
    /// home directory is the suite's property list (0600), which holds every key under the prefix.
    @Test func userDefaultsStore_hostileKeysWriteOnlyTheSuiteFile() async throws {
        let sentinel = try TemporaryDirectory(prefix: "strata-security-defaults")
        let home = sentinel.url.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let suite = "strata.security.\(UUID().uuidString)"
        let stderrFile = sentinel.url.deletingLastPathComponent().appendingPathComponent("\(UUID().uuidString)-stderr")
        defer { try? FileManager.default.removeItem(at: stderrFile) }
        let arguments = ["--store", "defaults", "--path", suite, "--umask", "000", "--count", "2"] + Self.keyArguments
        let environment = [
            "HOME": home.path, "XDG_CONFIG_HOME": home.appendingPathComponent(".config").path,
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ]
        try await TwoProcessTests.offPool {
            try KillLoop.runToCompletion(arguments, environment: environment, stderrFile: stderrFile)
        }

        let files = tree(sentinel.url).filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: sentinel.url.appendingPathComponent(path).path, isDirectory: &isDirectory)
                && !isDirectory.boolValue
        }
        let plist = try #require(files.first { $0.hasSuffix("\(suite).plist") }, "no suite file in \(files)")
        #expect(files == [plist], "only the suite's file is written: \(files)")
        #expect(permissions(sentinel.url.appendingPathComponent(plist).path) == 0o600)

        let data = try Data(contentsOf: sentinel.url.appendingPathComponent(plist))
        let contents = try #require(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
        #expect(Set(contents.keys) == Set(Self.hostileKeys.map { "strata." + $0 }))
        #expect(contents.values.allSatisfy { $0 is Data })
    }
}
