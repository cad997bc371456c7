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

@Suite("map(_:), mapInput(_:), mapError(_:), decoding(_:decoder:), named(_:)")
struct MapTests {
    @Test func map_transformsTheValue() async throws {
        let sut = StubLoader<Void, [Int]>(.success([1, 2, 3])).map { $0.count }
        #expect(try await sut.load() == 3)
    }

    @Test func map_throwingTransformFailsTheLoad() async throws {
        let sut = StubLoader<Void, Int>(.success(1)).map { _ -> Int in throw TestError("bad") }
        await #expect(throws: TestError("bad")) { try await sut.load() }
    }

    @Test func mapInput_adaptsTheKey() async throws {
        let spy = LoaderSpy<String, Int>(.success(1))
        _ = try await spy.mapInput { (id: Int) in "post-\(id)" }.load(9)
        #expect(spy.inputs == ["post-9"])
    }

    @Test func mapError_replacesErrorsButNotCancellation() async throws {
        struct DomainError: Error, Equatable {}
        let failing = StubLoader<Void, Int>(.failure(TestError())).mapError { _ in DomainError() }
        await #expect(throws: DomainError()) { try await failing.load() }

        let cancelled = StubLoader<Void, Int>(.failure(CancellationError())).mapError { _ in DomainError() }
        await #expect(throws: CancellationError.self) { try await cancelled.load() }
    }

    @Test func decoding_decodesJSONBytes() async throws {
        let sut = StubLoader<Void, Data>(.success(Data(#"{"id":1,"name":"a"}"#.utf8))).decoding(Item.self)
        #expect(try await sut.load() == itemA)
    }

    @Test func decoding_invalidBytesThrowATypedErrorSayingWhatAndWhere() async throws {
        let sut = StubLoader<Void, Data>(.success(Data(#"{"id":"one","name":"a"}"#.utf8))).decoding(Item.self)
        await #expect {
            try await sut.load()
        } throws: { error in
            guard let failure = error as? BodyDecodingError else { return false }
            return failure.type == "Item" && failure.description.contains("at .id")
        }
    }

    @Test func decoding_usesTheGivenDecoder() async throws {
        struct Stamp: Decodable, Sendable, Equatable { var at: Date }
        let json = Data(#"{"at":"2026-01-01T00:00:00Z"}"#.utf8)
        let sut = StubLoader<Void, Data>(.success(json)).decoding(Stamp.self) {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return decoder
        }
        #expect(try await sut.load() == Stamp(at: referenceDate))
    }

    @Test func named_namesTheTierInErrorsAndProvenance() async throws {
        let sut = StubLoader<Void, Int>(.failure(TestError("x"))).named("remote")
            .fallingBack(to: ClosureLoader { 1 }.originating(from: .bundled).named("defaults"))

        let served = try await sut.loadServed()
        #expect(served.provenance.tier == "defaults")
        #expect(served.provenance.origin == .bundled)
        #expect(sut.chainSummary == "remote → defaults")
    }

    @Test func named_isAPlainForwardWhenNotRecording() async throws {
        let spy = LoaderSpy<Int, Int>(.success(5))
        #expect(try await spy.named("x").load(1) == 5)
        #expect(spy.inputs == [1])
    }
}

@Suite("BundledLoader")
struct BundledLoaderTests {
    @Test func missingResource_throwsNotFoundNamingIt() async throws {
        let sut = BundledLoader(resource: "does_not_exist", withExtension: "json", in: .main)
        await #expect {
            try await sut.load()
        } throws: { error in
            guard case BundledResourceError.notFound(let resource, _) = error else { return false }
            return resource == "does_not_exist.json"
        }
    }

    @Test func fileResource_isServedWithBundledOrigin() async throws {
        let directory = try TemporaryDirectory()
        let file = directory.appending("default.json")
        try Data("[1,2]".utf8).write(to: file)

        let served = try await BundledLoader(fileURL: file).decoding([Int].self).loadServed()

        #expect(served.value == [1, 2])
        #expect(served.provenance.origin == .bundled)
        #expect(served.provenance.age == nil)
    }

    @Test func resourceRemovedAfterLookup_throwsUnreadable() async throws {
        let directory = try TemporaryDirectory()
        let file = directory.appending("default.json")
        try Data("[]".utf8).write(to: file)
        let sut = BundledLoader(fileURL: file)
        try FileManager.default.removeItem(at: file)

        await #expect {
            try await sut.load()
        } throws: { error in
            if case BundledResourceError.unreadable = error { return true }
            return false
        }
    }
}
