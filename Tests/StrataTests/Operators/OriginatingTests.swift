import Foundation
import Testing
import Strata
import StrataTesting

@Suite("originating(from:)")
struct OriginatingTests {
    @Test("the value passes through unchanged, and the provenance names the origin given")
    func namesTheOrigin() async throws {
        let served = try await ClosureLoader { itemA }.originating(from: .disk).named("own cache").loadServed()
        #expect(served.value == itemA)
        #expect(served.provenance.origin == .disk)
        #expect(served.provenance.tier == "own cache")
        #expect(served.provenance.age == .zero)
    }

    @Test("an immediate answer is tagged with the origin too, with no suspension")
    func tagsAnImmediateAnswer() async throws {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "k", storedAt: Date())
        let loader = store.loader(key: "k").originating(from: .custom("edge"))
        let served = try #require(loader.loadServedImmediately((), in: LoadContext(environment: .live)))
        #expect(served.value == itemA)
        #expect(served.provenance.origin == .custom("edge"))
    }

    @Test("a failure of its base passes through as it is")
    func failuresPassThrough() async {
        await #expect(throws: TestError("down")) {
            try await ClosureLoader<Void, Item> { throw TestError("down") }.originating(from: .remote).load()
        }
    }

    @Test("the chain tree shows the origin above its base")
    func drawsItself() {
        let tree = String(describing: ClosureLoader("own") { itemA }.originating(from: .disk))
        #expect(tree.hasPrefix("origin(disk)"))
    }
}
