import Foundation
import Testing
import PostsRepositoryExample
import Strata
import StrataTesting

/// The decorator and the Strata chain are two spellings of one policy; these tests hold them to it.
@Suite("S2 PostsRepository: PostLoaders.cacheFirst agrees with PostRepoCacheDecorator")
struct PostLoadersTests {
    /// The same remote seen as a `Loader`, so both forms ask one spy.
    func remote(_ spy: PostRepoSpy) -> some Loader<Int, Post> {
        ClosureLoader("spy") { (id: Int) in try await spy.getPost(id: id) }
    }

    @Test func bothServeTheSameValuesAndAskTheRemoteOnlyOnMisses() async throws {
        let decoratorRemote = PostRepoSpy(posts: [hello, second])
        let chainRemote = PostRepoSpy(posts: [hello, second])
        let decorator = PostRepoCacheDecorator(inner: decoratorRemote, cache: InMemoryPostCache())
        let chain = PostLoaders.cacheFirst(remote: remote(chainRemote), store: MemoryStore<String, Post>())
        let reads = [1, 2, 1, 2, 1]

        var fromDecorator: [Post] = []
        var fromChain: [Post] = []
        for id in reads {
            fromDecorator.append(try await decorator.getPost(id: id))
            fromChain.append(try await chain.load(id))
        }

        #expect(fromDecorator == [hello, second, hello, second, hello])
        #expect(fromChain == fromDecorator)
        #expect(await decoratorRemote.messages == [.getPost(id: 1), .getPost(id: 2)])
        #expect(await chainRemote.messages == decoratorRemote.messages)
    }

    @Test func bothShareOneStore_whatOneCachedTheOtherServesWithoutTheRemote() async throws {
        let store = MemoryStore<String, Post>()
        let spy = PostRepoSpy(posts: [hello, second])
        let decorator = PostRepoCacheDecorator(inner: spy, cache: StorePostCache(store: store))
        let chain = PostLoaders.cacheFirst(remote: remote(spy), store: store)

        _ = try await chain.load(1)
        _ = try await decorator.getPost(id: 2)

        #expect(try await decorator.getPost(id: 1) == hello)
        #expect(try await chain.load(2) == second)
        #expect(await spy.messages == [.getPost(id: 1), .getPost(id: 2)])
    }

    @Test func chainReportsWhichTierServed() async throws {
        let chain = PostLoaders.cacheFirst(remote: remote(PostRepoSpy(posts: [hello])), store: MemoryStore<String, Post>())

        let first = try await chain.loadServed(1)
        let second = try await chain.loadServed(1)

        #expect(first.events.contains { if case .cacheWritten(_, "post-1") = $0 { true } else { false } })
        #expect(second.provenance.origin == .memory)
        #expect(second.provenance.tier == "cached post")
    }

    @Test func whenNeitherHasThePost_theDecoratorThrowsNotFoundAndTheChainNamesBothTiers() async throws {
        let decorator = PostRepoCacheDecorator(inner: PostRepoSpy(), cache: InMemoryPostCache())
        let chain = PostLoaders.cacheFirst(remote: remote(PostRepoSpy()), store: MemoryStore<String, Post>())

        await #expect(throws: PostRepoError.notFound(id: 3)) { try await decorator.getPost(id: 3) }
        do {
            _ = try await chain.load(3)
            Issue.record("expected the chain to fail")
        } catch let error as FallbackError {
            #expect(error.failures.map(\.tier) == ["cached post", "remote"])
            #expect(error.failures.last?.error as? PostRepoError == .notFound(id: 3))
        }
    }

    @Test func chainWithAMaxAge_refetchesAnExpiredPost() async throws {
        let clock = ManualClock()
        let spy = PostRepoSpy(posts: [hello])
        let chain = PostLoaders.cacheFirst(
            remote: remote(spy), store: MemoryStore<String, Post>(), policy: .maxAge(.seconds(1 * 3600)), now: clock.wallClock)

        _ = try await chain.load(1)
        clock.advance(by: .seconds(3599))
        _ = try await chain.load(1)
        clock.advance(by: .seconds(1))
        _ = try await chain.load(1)

        #expect(await spy.messages == [.getPost(id: 1), .getPost(id: 1)], "fresh below one hour, expired at exactly one hour")
    }
}
