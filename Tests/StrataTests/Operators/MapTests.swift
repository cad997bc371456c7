import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("map(_:), mapInput(_:), mapError(_:)")
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

}

