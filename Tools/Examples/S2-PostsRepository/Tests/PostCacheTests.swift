import Foundation
import Testing
import PostsRepositoryExample
import Strata
import StrataTesting

@Suite("S2 PostsRepository: PostCache, in memory, on disk, in UserDefaults")
struct PostCacheTests {
    @Test func key_isPostDashID() {
        #expect(InMemoryPostCache.key(for: 42) == "post-42")
    }

    @Test func inMemory_missesWhenEmptyThenServesWhatWasStored() async {
        let cache = InMemoryPostCache()
        #expect(await cache.getPost(id: 1) == nil)

        await cache.store(post: hello)

        #expect(await cache.getPost(id: 1) == hello)
        #expect(await cache.getPost(id: 2) == nil)
    }

    @Test func storingAPostAgain_replacesTheEarlierCopy() async {
        let cache = InMemoryPostCache()
        await cache.store(post: hello)

        await cache.store(post: Post(id: 1, title: "Edited", body: "World"))

        #expect(await cache.getPost(id: 1)?.title == "Edited")
    }

    @Test func everyPost_isStoredUnderItsOwnKey() async throws {
        let store = StoreSpy(MemoryStore<String, Post>())
        let cache = StorePostCache(store: store, now: { referenceDate })

        await cache.store(post: hello)
        await cache.store(post: second)

        #expect(store.messages == [
            .insert("post-1", CacheEntry(value: hello, storedAt: referenceDate)),
            .insert("post-2", CacheEntry(value: second, storedAt: referenceDate)),
        ])
    }

    @Test func onDisk_aSecondInstanceOnTheSameDirectorySeesThePosts() async throws {
        let directory = try TemporaryDirectory()
        await DiskPostCache(directory: directory.url).store(post: hello)

        let relaunched = DiskPostCache(directory: directory.url)

        #expect(await relaunched.getPost(id: 1) == hello)
        #expect(FileManager.default.fileExists(atPath: relaunched.backingStore.fileURL(for: "post-1").path))
    }

    @Test func onDisk_aCorruptEntryIsAMissNotACrash() async throws {
        let directory = try TemporaryDirectory()
        let cache = DiskPostCache(directory: directory.url)
        await cache.store(post: hello)
        try Data("garbage".utf8).write(to: cache.backingStore.fileURL(for: "post-1"))

        #expect(await cache.getPost(id: 1) == nil)
    }

    @Test func onDisk_aFailedWriteDoesNotFailTheCaller() async throws {
        let directory = try TemporaryDirectory()
        let notADirectory = directory.appending("file")
        try Data().write(to: notADirectory)
        let cache = DiskPostCache(directory: notADirectory)

        await cache.store(post: hello)

        #expect(await cache.getPost(id: 1) == nil)
    }

    @Test func inUserDefaults_aSecondInstanceOnTheSameSuiteSeesThePosts() async throws {
        let suite = "strata.posts-example.\(UUID().uuidString)"
        defer { UserDefaults(suiteName: suite)?.removePersistentDomain(forName: suite) }
        await UserDefaultsPostCache(suiteName: suite).store(post: hello)

        let relaunched = UserDefaultsPostCache(suiteName: suite)

        #expect(await relaunched.getPost(id: 1) == hello)
        #expect(UserDefaults(suiteName: suite)?.object(forKey: "posts.post-1") != nil, "one defaults key per post")
    }
}

/// A fixed date: 2026-01-01T00:00:00Z.
let referenceDate = Date(timeIntervalSince1970: 1_767_225_600)
