import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("Loader, ClosureLoader, AnyLoader")
struct LoaderTests {
    @Test func closureLoader_runsItsBodyWithTheInput() async throws {
        let sut = ClosureLoader { (n: Int) in n * 2 }
        #expect(try await sut.load(21) == 42)
        let unkeyed = ClosureLoader { "value" }
        #expect(try await unkeyed.load() == "value")
    }

    @Test func anyLoader_forwardsLoadsAndKeepsTheDescription() async throws {
        let spy = LoaderSpy<Int, String>(.success("x"), name: "the spy")
        let erased = spy.eraseToAnyLoader()
        #expect(try await erased.load(3) == "x")
        #expect(spy.inputs == [3])
        #expect(erased.description == "the spy")
    }

    @Test func anyLoader_doesNotWrapAnAlreadyErasedLoader() async throws {
        let erased = AnyLoader<Void, Int>("one") { 1 }
        let twice = AnyLoader(erased)
        #expect(twice.description == "one")
        #expect(try await twice.load() == 1)
    }

    @Test func heterogeneousLoaders_fitInOneArrayOnceErased() async throws {
        let loaders: [AnyLoader<Void, Int>] = [
            ClosureLoader { 1 }.eraseToAnyLoader(),
            StubLoader(.success(2)).eraseToAnyLoader(),
            StubLoader<Void, Int>(.failure(TestError())).fallingBack(to: ClosureLoader { 3 }).eraseToAnyLoader(),
        ]
        var values: [Int] = []
        for loader in loaders { values.append(try await loader.load()) }
        #expect(values == [1, 2, 3])
    }

    @Test func writesAreLoadersToo() async throws {
        let created = Locked<[String]>([])
        let createPost = ClosureLoader { (title: String) -> Item in
            created.withLock { $0.append(title) }
            return Item(id: 1, name: title)
        }
        #expect(try await createPost.load("hello") == Item(id: 1, name: "hello"))
        #expect(created.withLock { $0 } == ["hello"])
    }

    @Test func loaderWithoutOrigin_reportsUnknown() async throws {
        let served = try await ClosureLoader { 1 }.loadServed()
        #expect(served.provenance.origin == .unknown)
        #expect(served.events.isEmpty)
    }
}
