import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// Keys are data, never paths; what a store writes is private to its user.
@Suite("Store security")
struct StoreSecurityTests {
    /// Keys an attacker (or a careless caller) might pass: traversal, absolute paths, NUL bytes, names
    /// of the store's own files, 10 KB of text, unicode, control characters.
    static let hostileKeys: [String] = [
        "../../etc/passwd", "/etc/passwd", "..", ".", "", "a\0b", "\0", "../\0/../x", String(repeating: "k", count: 10_240),
        String(repeating: "../", count: 3_000) + "etc/shadow", "ключ 🔑", "~/.ssh/id_rsa", "..\\..\\windows\\system32",
        "a/b/../../../c", "%2e%2e%2fetc", "line\nbreak", "tab\there", ".strata-index", ".strata-index.lock", ".tmp-0",
        "CON", "\u{202E}txt.exe", "\u{FEFF}feed",
    ]

    let sentinel: TemporaryDirectory
    /// The store's directory, two levels below the sentinel directory: nothing may appear beside it.
    var cacheDirectory: URL { sentinel.url.appendingPathComponent("app/cache") }

    init() throws {
        sentinel = try TemporaryDirectory(prefix: "strata-security")
    }

    func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    /// Every path under the sentinel directory, relative to it.
    func sentinelTree() -> [String] {
        (FileManager.default.enumerator(atPath: sentinel.url.path)?.compactMap { $0 as? String } ?? []).sorted()
    }

    @Test(arguments: [false, true])
    func fileStore_everyHostileKeyStaysInsideTheDirectoryAndReadsBackItsOwnValue(limited: Bool) async throws {
        let store = FileStore<Item>(directory: cacheDirectory, countLimit: limited ? 1_000 : nil, logger: quietLogger)
        for (index, key) in Self.hostileKeys.enumerated() {
            try await store.insert(Item(id: index, name: key), for: key, storedAt: referenceDate)
        }

        // Each key is isolated: it reads back its own value, whatever the other keys were.
        for (index, key) in Self.hostileKeys.enumerated() {
            #expect(try await store.retrieve(key)?.value == Item(id: index, name: key), "key \(key.debugDescription.prefix(40))")
        }
        // Nothing outside the cache directory; inside it, only hashed names (and the index files).
        let tree = sentinelTree()
        let inside = tree.filter { $0.hasPrefix("app/cache/") }.map { String($0.dropFirst("app/cache/".count)) }
        #expect(Set(tree).subtracting(["app", "app/cache"]) == Set(inside.map { "app/cache/" + $0 }))
        let indexFiles: Set<String> = limited ? [".strata-index", ".strata-index.lock"] : []
        let entryNames = inside.filter { !indexFiles.contains($0) }
        #expect(entryNames.count == Set(Self.hostileKeys).count)
        #expect(entryNames.allSatisfy { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }, "\(entryNames)")
        #expect(Set(inside).isSuperset(of: indexFiles))

        // Private: the directory 0700, every file 0600.
        #expect(mode(cacheDirectory.path) == 0o700)
        for name in inside {
            #expect(mode(cacheDirectory.path + "/" + name) == 0o600, "\(name)")
        }

        for key in Self.hostileKeys {
            try await store.delete(key)
        }
        #expect(Set(sentinelTree()) == Set(["app", "app/cache"] + indexFiles.map { "app/cache/" + $0 }))
    }

    /// A symbolic link planted where an entry goes (pointing at a file outside the cache) is never
    /// written through: a read sees a foreign file (a miss, the link removed), a write replaces the link.
    @Test func fileStore_aSymbolicLinkPlantedAtAnEntryIsNeverWrittenThrough() async throws {
        let outside = sentinel.url.appendingPathComponent("secret.txt")
        try Data("do not touch".utf8).write(to: outside)
        let store = FileStore<Item>(directory: cacheDirectory, logger: quietLogger)
        try await store.insert(itemB, for: "other", storedAt: referenceDate)
        let entry = store.fileURL(for: "feed")

        try FileManager.default.createSymbolicLink(at: entry, withDestinationURL: outside)
        #expect(try await store.retrieve("feed") == nil)
        #expect(mode(entry.path) == nil, "the link is removed as a foreign file")

        try FileManager.default.createSymbolicLink(at: entry, withDestinationURL: outside)
        try await store.insert(itemA, for: "feed", storedAt: referenceDate)
        var info = stat()
        #expect(lstat(entry.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG, "the link was replaced by a file")
        #expect(try await store.retrieve("feed")?.value == itemA)
        #expect(try Data(contentsOf: outside) == Data("do not touch".utf8))
        #expect(mode(outside.path) != nil)
    }

    enum IndexFile: String, CaseIterable, Sendable {
        case journal = ".strata-index"
        case lock = ".strata-index.lock"
    }

    /// Links planted as the index journal or its lock are never followed: the target outside is
    /// untouched, and the store either repairs its index or fails with a typed error.
    @Test(arguments: IndexFile.allCases)
    func limitedFileStore_aSymbolicLinkPlantedAsAnIndexFileIsNeverFollowed(_ file: IndexFile) async throws {
        let outside = sentinel.url.appendingPathComponent("secret.txt")
        let secret = Data("do not touch".utf8)
        try secret.write(to: outside)
        try FileManager.default.createDirectory(at: cacheDirectory, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: cacheDirectory.appendingPathComponent(file.rawValue), withDestinationURL: outside)
        let store = FileStore<Item>(directory: cacheDirectory, countLimit: 10, logger: quietLogger)

        for index in 0..<5 {
            do {
                try await store.insert(Item(id: index, name: "x"), for: "key-\(index)", storedAt: referenceDate)
                _ = try await store.retrieve("key-\(index)")
            } catch let error as StoreError {
                #expect(error.store == store.description)
            }
        }
        #expect(try Data(contentsOf: outside) == secret)
    }

    // MARK: Modes with limits

    @Test func limitedFileStore_indexJournalAndLockAreOwnerOnly() async throws {
        let store = FileStore<Item>(directory: cacheDirectory, countLimit: 2, logger: quietLogger)
        for index in 0..<5 {
            try await store.insert(Item(id: index, name: "x"), for: "key-\(index)", storedAt: referenceDate)
        }
        for file in IndexFile.allCases {
            #expect(mode(cacheDirectory.appendingPathComponent(file.rawValue).path) == 0o600, "\(file.rawValue)")
        }
        #expect(mode(cacheDirectory.path) == 0o700)
    }

    // MARK: UserDefaultsStore

    @Test func userDefaultsStore_everyHostileKeyReadsBackItsOwnValue() async throws {
        try await UserDefaultsSuite.withScope {
            let store = UserDefaultsStore<Item>(suiteName: UserDefaultsSuite.scoped())
            for (index, key) in Self.hostileKeys.enumerated() {
                try await store.insert(Item(id: index, name: key), for: key, storedAt: referenceDate)
            }
            for (index, key) in Self.hostileKeys.enumerated() {
                #expect(try await store.retrieve(key)?.value == Item(id: index, name: key), "key \(key.debugDescription.prefix(40))")
            }
            // The app's own defaults are out of reach: a key equal to an app key lands under the prefix.
            let defaults = try #require(UserDefaults(suiteName: store.suiteName))
            defaults.set("the app's", forKey: "theme")
            try await store.insert(itemA, for: "theme", storedAt: referenceDate)
            try await store.delete("theme")
            #expect(defaults.string(forKey: "theme") == "the app's")
        }
    }
}
