import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

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
