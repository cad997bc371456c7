import Foundation
import Strata
@testable import StrataProxy
import Testing

/// Shared-cache rules beyond the basics: credentials kept for `Vary` only as digests,
/// RFC 9213's targeted fields, RFC 5861's windows in the plan, a refusal that is one request's own.
@Suite("SharedCachePolicy: credentials, targeted fields, RFC 5861")
struct ProxyPolicyAdditionsTests {
    func request(_ fields: HTTPFields) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "http", authority: "origin", path: "/a", headerFields: fields)
    }

    @Test(arguments: [HTTPField.Name.cookie, .authorization, HTTPField.Name("Proxy-Authorization")!])
    func aCredentialKeptForVary_isADigest_neverTheValue(name: HTTPField.Name) throws {
        let alice = request([name: "session=alice-secret-123"])
        let values = SharedCachePolicy.varyValues(names: [name.canonicalName], request: alice)
        let kept = try #require(values[name.canonicalName] ?? nil)
        #expect(kept.hasPrefix("sha256:") && kept.count == 7 + 64)
        #expect(!kept.contains("alice-secret-123"))
        #expect(SharedCachePolicy.matchesVary(storedRequestValues: values, request: alice))
        #expect(!SharedCachePolicy.matchesVary(storedRequestValues: values, request: request([name: "session=bob"])))
        #expect(!SharedCachePolicy.matchesVary(storedRequestValues: values, request: request([:])))
    }

    @Test func anOrdinaryVaryValue_isKeptAsItIs() {
        let values = SharedCachePolicy.varyValues(names: ["accept-encoding"], request: request([.acceptEncoding: "gzip"]))
        #expect(values == ["accept-encoding": "gzip"])
    }

    @Test func theFirstNonEmptyTargetedField_standsForCacheControl_andExpiresIsIgnored() {
        let response = HTTPResponse(status: .ok, headerFields: [
            .cacheControl: "no-store", .expires: "Thu, 01 Jan 2099 00:00:00 GMT",
            HTTPField.Name("CDN-Cache-Control")!: "max-age=60", HTTPField.Name("Strata-Cache-Control")!: " ",
        ])
        let targets = [HTTPField.Name("Strata-Cache-Control")!, HTTPField.Name("CDN-Cache-Control")!]
        let judged = SharedCachePolicy.targeted(response, targets: targets)
        #expect(judged.headerFields[.cacheControl] == "max-age=60", "the empty Strata-Cache-Control is skipped")
        #expect(judged.headerFields[.expires] == nil)
        let untouched = SharedCachePolicy.targeted(response, targets: [HTTPField.Name("Other-Cache-Control")!])
        #expect(untouched == response)
    }

    @Test func thePlan_carriesRFC5861Windows() throws {
        let response = HTTPResponse(status: .ok, headerFields: [
            .cacheControl: "max-age=10, stale-while-revalidate=30, stale-if-error=600", .eTag: "\"1\"",
        ])
        guard case .store(let plan) = SharedCachePolicy.storability(request: request([:]), response: response, responseTime: Date()) else {
            Issue.record("not stored")
            return
        }
        #expect(plan.staleWhileRevalidate == .seconds(30))
        #expect(plan.staleIfError == .seconds(600))
    }

    @Test func a304_freshensTheStoredFields_andTheStoredAgeGoes() {
        let stored: HTTPFields = [
            .date: "Mon, 01 Jan 2024 00:00:00 GMT", .age: "50", .cacheControl: "max-age=60", .eTag: "\"v1\"",
            .contentType: "application/json", .contentLength: "12",
        ]
        let notModified: HTTPFields = [
            .date: "Mon, 01 Jan 2024 01:00:00 GMT", .cacheControl: "max-age=120", .eTag: "\"v1\"", .connection: "close",
        ]
        let fields = SharedCachePolicy.freshened(stored, by: notModified)
        #expect(fields[.age] == nil, "the first response's Age is not the freshened one's")
        #expect(fields[.date] == "Mon, 01 Jan 2024 01:00:00 GMT")
        #expect(fields[.cacheControl] == "max-age=120")
        #expect(fields[.contentType] == "application/json")
        #expect(fields[.contentLength] == "12", "the stored body's length stays")
        #expect(fields[.connection] == nil)
        // Its initial age is the 304's: no Age, its Date one second before it arrived.
        let received = Date(timeIntervalSince1970: 1_704_070_801)
        let age = SharedCachePolicy.initialAge(
            response: HTTPResponse(status: .ok, headerFields: fields), requestTime: received, responseTime: received)
        #expect(age == .seconds(1))
    }

    @Test(arguments: [
        ("127.0.0.1:8081", true), ("localhost:8081", true), ("[::1]:8081", true), ("127.1.2.3", true),
        ("evil.example:8081", false), ("127.0.0.1.evil.example:8081", false), ("", false),
    ])
    func tokenlessReads_needALoopbackHost(authority: String, loopback: Bool) {
        // A page whose name was rebound to 127.0.0.1 still sends its own name as Host.
        #expect(CachingProxy.namesLoopback(authority.isEmpty ? nil : authority) == loopback)
    }

    @Test func aRefusalForOneRequestsCredentials_isNotARefusalForEveryRequest() {
        let response = HTTPResponse(status: .ok, headerFields: [.cacheControl: "max-age=60"])
        #expect(!CachingProxy.refusesEveryRequest(response, responseTime: Date(), path: "/a"))
        // `private` may be one client's answer (its session): it never removes the shared response.
        let privateOne = HTTPResponse(status: .ok, headerFields: [.cacheControl: "private, max-age=60"])
        #expect(!CachingProxy.refusesEveryRequest(privateOne, responseTime: Date(), path: "/a"))
        let noStore = HTTPResponse(status: .ok, headerFields: [.cacheControl: "no-store"])
        #expect(CachingProxy.refusesEveryRequest(noStore, responseTime: Date(), path: "/a"))
        let withCookie = HTTPRequest(method: .get, scheme: "http", authority: "origin", path: "/a", headerFields: [.cookie: "s=1"])
        #expect(CachingProxy.carriesCredentials(withCookie))
    }
}
