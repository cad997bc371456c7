import Foundation
import Testing
@_spi(StrataInternals) import Strata
@testable import StrataProxy

/// The rules of the shared cache (RFC 9111), one table per decision, on fixed instants.
@Suite("SharedCachePolicy")
struct SharedCachePolicyTests {
    // MARK: Cache-Control

    @Test(arguments: [
        DirectivesCase("", { _ in }),
        DirectivesCase("max-age=60", { $0.maxAge = .seconds(60) }),
        DirectivesCase("MAX-AGE=\"60\", S-MaxAge=30", { $0.maxAge = .seconds(60); $0.sMaxAge = .seconds(30) }),
        DirectivesCase("max-age=abc, max-age=20, max-age=10", { $0.maxAge = .seconds(20) }),
        DirectivesCase("max-age=-1, max-age=1.5, max-age=", { _ in }),
        DirectivesCase("s-maxage=99999999999", { $0.sMaxAge = .seconds(2_147_483_648) }),
        DirectivesCase("no-store, no-cache=\"Set-Cookie, Vary\", private=\"X-A\", public", {
            $0.noStore = true; $0.noCache = true; $0.isPrivate = true; $0.isPublic = true
        }),
        DirectivesCase("must-revalidate, Proxy-Revalidate, stale-if-error=300, stale-while-revalidate=\"30\"", {
            $0.mustRevalidate = true; $0.proxyRevalidate = true
            $0.staleIfError = .seconds(300); $0.staleWhileRevalidate = .seconds(30)
        }),
        DirectivesCase("max-stale", { $0.acceptsAnyStaleness = true }),
        DirectivesCase("max-stale=abc", { _ in }),
        DirectivesCase("max-stale=60, min-fresh=10, only-if-cached, x-unknown=1", {
            $0.maxStale = .seconds(60); $0.minFresh = .seconds(10); $0.onlyIfCached = true
        }),
    ])
    func parsesDirectives(_ testCase: DirectivesCase) {
        #expect(SharedCacheDirectives(parsing: testCase.fieldValue) == testCase.expected)
    }

    @Test func directivesCombineAllCacheControlFieldLines() {
        let fields = HTTPFields([
            HTTPField(name: .cacheControl, value: "max-age=60"),
            HTTPField(name: .cacheControl, value: "private, max-age=5"),
        ])
        var expected = SharedCacheDirectives()
        expected.maxAge = .seconds(60)
        expected.isPrivate = true
        #expect(SharedCacheDirectives(fields) == expected)
        #expect(SharedCacheDirectives(HTTPFields()) == SharedCacheDirectives())
    }

    // MARK: Storability

    @Test(arguments: [
        // Method and status
        StorabilityCase("max-age on a 200", response: [.cacheControl: "max-age=60"], expected: .store(lifetime: 60)),
        StorabilityCase("POST", request: makeRequest(method: .post), response: [.cacheControl: "max-age=60"], expected: .doNotStore),
        StorabilityCase("HEAD", request: makeRequest(method: .head), response: [.cacheControl: "max-age=60"], expected: .doNotStore),
        StorabilityCase("103, not final", status: .earlyHints, response: [.cacheControl: "max-age=60"], expected: .doNotStore),
        StorabilityCase("206", status: .partialContent, response: [.cacheControl: "max-age=60"], expected: .doNotStore),
        StorabilityCase("304", status: .notModified, response: [.cacheControl: "max-age=60", .eTag: "\"v1\""], expected: .doNotStore),
        StorabilityCase("500 with explicit freshness", status: .internalServerError, response: [.cacheControl: "max-age=10"], expected: .store(lifetime: 10)),
        // no-store, private
        StorabilityCase("no-store in the response", response: [.cacheControl: "max-age=60, no-store"], expected: .doNotStore),
        StorabilityCase("no-store in the request", request: makeRequest([.cacheControl: "no-store"]), response: [.cacheControl: "max-age=60"], expected: .doNotStore),
        StorabilityCase("private", response: [.cacheControl: "private, max-age=60"], expected: .doNotStore),
        StorabilityCase("private with field names", response: [.cacheControl: "private=\"Set-Cookie\", max-age=60"], expected: .doNotStore),
        StorabilityCase("private beats public", response: [.cacheControl: "public, private, max-age=60"], expected: .doNotStore),
        // Authorization (§3.5)
        StorabilityCase("Authorization, max-age only", request: makeRequest([.authorization: "Bearer t"]), response: [.cacheControl: "max-age=60"], expected: .doNotStore),
        StorabilityCase("Authorization, public", request: makeRequest([.authorization: "Bearer t"]), response: [.cacheControl: "public, max-age=60"], expected: .store(lifetime: 60)),
        StorabilityCase("Authorization, s-maxage", request: makeRequest([.authorization: "Bearer t"]), response: [.cacheControl: "s-maxage=30"], expected: .store(lifetime: 30, mayServeStale: false)),
        StorabilityCase("Authorization, must-revalidate", request: makeRequest([.authorization: "Bearer t"]), response: [.cacheControl: "must-revalidate, max-age=60"], expected: .store(lifetime: 60, mayServeStale: false)),
        // Set-Cookie, Vary
        StorabilityCase("Set-Cookie", response: [.cacheControl: "max-age=60", .setCookie: "id=1"], expected: .doNotStore),
        StorabilityCase("Set-Cookie, public", response: [.cacheControl: "public, max-age=60", .setCookie: "id=1"], expected: .store(lifetime: 60)),
        StorabilityCase("Vary: *", response: [.cacheControl: "max-age=60", .vary: "*"], expected: .doNotStore),
        StorabilityCase("Vary: a list with *", response: [.cacheControl: "max-age=60", .vary: "Accept-Encoding, *"], expected: .doNotStore),
        // Explicit freshness: s-maxage, max-age, Expires
        StorabilityCase("s-maxage beats max-age", response: [.cacheControl: "max-age=60, s-maxage=30"], expected: .store(lifetime: 30, mayServeStale: false)),
        StorabilityCase("max-age beats Expires", response: [.cacheControl: "max-age=10", .date: httpDate(0), .expires: httpDate(1000)], expected: .store(lifetime: 10)),
        StorabilityCase("Expires - Date", response: [.date: httpDate(0), .expires: httpDate(120)], expected: .store(lifetime: 120)),
        StorabilityCase("Expires - response time without Date", response: [.expires: httpDate(92)], expected: .store(lifetime: 90)),
        StorabilityCase("Expires before Date, with an ETag", response: [.date: httpDate(0), .expires: httpDate(-60), .eTag: "\"v1\""], expected: .store(lifetime: 0)),
        StorabilityCase("invalid Expires, with an ETag", response: [.expires: "0", .eTag: "\"v1\""], expected: .store(lifetime: 0)),
        StorabilityCase("invalid Expires, no validator", response: [.expires: "0"], expected: .doNotStore),
        StorabilityCase("max-age=0 with Last-Modified", response: [.cacheControl: "max-age=0", .lastModified: httpDate(-60)], expected: .store(lifetime: 0)),
        StorabilityCase("max-age=0, no validator", response: [.cacheControl: "max-age=0, stale-if-error=60"], expected: .doNotStore),
        // no-cache, revalidation directives
        StorabilityCase("no-cache with an ETag", response: [.cacheControl: "no-cache, max-age=60", .eTag: "\"v1\""], expected: .store(lifetime: 0, mayServeStale: false)),
        StorabilityCase("no-cache, no validator", response: [.cacheControl: "no-cache, max-age=60"], expected: .doNotStore),
        StorabilityCase("proxy-revalidate", response: [.cacheControl: "max-age=60, proxy-revalidate"], expected: .store(lifetime: 60, mayServeStale: false)),
        // Heuristic freshness (§4.2.2)
        StorabilityCase("heuristic: 10% of Date - Last-Modified", response: [.date: httpDate(0), .lastModified: httpDate(-1000)], expected: .store(lifetime: 100)),
        StorabilityCase("heuristic without Date: from the response time", response: [.lastModified: httpDate(-998)], expected: .store(lifetime: 100)),
        StorabilityCase("heuristic capped at a day", response: [.date: httpDate(0), .lastModified: httpDate(-30 * 86_400)], expected: .store(lifetime: 86_400)),
        StorabilityCase("heuristic on a 404", status: .notFound, response: [.date: httpDate(0), .lastModified: httpDate(-1000)], expected: .store(lifetime: 100)),
        StorabilityCase("Last-Modified after Date", response: [.date: httpDate(0), .lastModified: httpDate(60)], expected: .store(lifetime: 0)),
        StorabilityCase("302 is not heuristically cacheable", status: .found, response: [.date: httpDate(0), .lastModified: httpDate(-1000)], expected: .doNotStore),
        StorabilityCase("302 marked public is", status: .found, response: [.cacheControl: "public", .date: httpDate(0), .lastModified: httpDate(-1000)], expected: .store(lifetime: 100)),
        StorabilityCase("200 with only an ETag", response: [.eTag: "\"v1\""], expected: .store(lifetime: 0)),
        StorabilityCase("200 with no freshness information", response: [.contentType: "text/plain"], expected: .doNotStore),
        StorabilityCase("invalid max-age falls through to Expires", response: [.cacheControl: "max-age=soon", .date: httpDate(0), .expires: httpDate(30)], expected: .store(lifetime: 30)),
    ])
    func storability(_ testCase: StorabilityCase) {
        let result = SharedCachePolicy.storability(request: testCase.request, response: testCase.response, responseTime: responseTime)
        switch (result, testCase.expected) {
        case let (.store(plan), .store(lifetime, mayServeStale)):
            #expect(plan.lifetime == .seconds(lifetime))
            #expect(plan.mayServeStale == mayServeStale)
        case let (.doNotStore(reason), .doNotStore):
            #expect(!reason.isEmpty)
        default:
            Issue.record("\(testCase.name): got \(result)")
        }
    }

    @Test func doNotStoreNamesTheRuleThatRefused() {
        func reason(_ request: HTTPRequest, _ fields: HTTPFields) -> String? {
            guard case let .doNotStore(why) = SharedCachePolicy.storability(
                request: request, response: HTTPResponse(status: .ok, headerFields: fields), responseTime: responseTime
            ) else { return nil }
            return why
        }
        #expect(reason(makeRequest(), [.cacheControl: "max-age=60", .vary: "*"])?.contains("Vary") == true)
        #expect(reason(makeRequest([.authorization: "Basic x"]), [.cacheControl: "max-age=60"])?.contains("Authorization") == true)
        #expect(reason(makeRequest(), [.cacheControl: "max-age=60", .setCookie: "a=1"])?.contains("Set-Cookie") == true)
        #expect(reason(makeRequest(), [.contentType: "text/plain"])?.contains("no freshness information") == true)
    }

    @Test func planListsTheVaryNamesLowercasedDeduplicatedAndSorted() throws {
        let response = HTTPResponse(status: .ok, headerFields: HTTPFields([
            HTTPField(name: .cacheControl, value: "max-age=60"),
            HTTPField(name: .vary, value: "Accept-Language, accept-encoding"),
            HTTPField(name: .vary, value: " Accept-Encoding ,Origin,"),
        ]))
        let plan = try #require(storedPlan(of: response))
        #expect(plan.varyFieldNames == ["accept-encoding", "accept-language", "origin"])
        #expect(try #require(storedPlan(of: HTTPResponse(status: .ok, headerFields: [.cacheControl: "max-age=60"]))).varyFieldNames == [])
    }

    @Test func planCollectsCacheTagAndSurrogateKeyTags() throws {
        let response = HTTPResponse(status: .ok, headerFields: HTTPFields([
            HTTPField(name: .cacheControl, value: "max-age=60"),
            HTTPField(name: Names.cacheTag, value: "product-7, ,catalog "),
            HTTPField(name: Names.cacheTag, value: "home"),
            HTTPField(name: Names.surrogateKey, value: "catalog  user-3\tproduct-7 Home"),
        ]))
        let plan = try #require(storedPlan(of: response))
        #expect(plan.tags == ["product-7", "catalog", "home", "user-3", "Home"])
        #expect(try #require(storedPlan(of: HTTPResponse(status: .ok, headerFields: [.cacheControl: "max-age=60"]))).tags == [])
    }

    // MARK: Age (§4.2.3)

    @Test(arguments: [
        AgeCase("no Date, no Age: the response delay", [:], expected: 2),
        AgeCase("Age plus the response delay", [.age: "10"], expected: 12),
        AgeCase("apparent age beats the corrected Age", [.date: httpDate(-100), .age: "10"], expected: 102),
        AgeCase("corrected Age beats the apparent age", [.date: httpDate(-5), .age: "10"], expected: 12),
        AgeCase("Date ahead of the cache's clock", [.date: httpDate(100)], expected: 2),
        AgeCase("invalid Age ignored", [.age: "ten"], expected: 2),
        AgeCase("negative Age ignored", [.age: "-5"], expected: 2),
        AgeCase("a list: the first member", [.age: "10, 20"], expected: 12),
        AgeCase("response before request: never negative", [:], requestTime: 10, expected: 0),
    ])
    func initialAge(_ testCase: AgeCase) {
        let age = SharedCachePolicy.initialAge(
            response: HTTPResponse(status: .ok, headerFields: testCase.fields),
            requestTime: requestTime + testCase.requestTime,
            responseTime: responseTime
        )
        #expect(age == .seconds(testCase.expected))
    }

    @Test func currentAgeAddsTheResidentTime() {
        #expect(SharedCachePolicy.currentAge(initialAge: .seconds(12), responseTime: responseTime, now: responseTime + 30) == .seconds(42))
        #expect(SharedCachePolicy.currentAge(initialAge: .seconds(12), responseTime: responseTime, now: responseTime - 30) == .seconds(12))
    }

    // MARK: Freshness and staleness (§4.2, §5.2.1)

    @Test(arguments: [
        FreshnessCase("", lifetime: 60, age: 10, expected: true),
        FreshnessCase("", lifetime: 60, age: 60, expected: false),
        FreshnessCase("", lifetime: 0, age: 0, expected: false),
        FreshnessCase("max-age=5", lifetime: 60, age: 10, expected: false),
        FreshnessCase("max-age=10", lifetime: 60, age: 10, expected: true),
        FreshnessCase("min-fresh=60", lifetime: 100, age: 50, expected: false),
        FreshnessCase("min-fresh=50", lifetime: 100, age: 50, expected: true),
        FreshnessCase("no-cache", lifetime: 60, age: 10, expected: false),
        FreshnessCase("max-stale", lifetime: 60, age: 70, expected: false),
    ])
    func isFresh(_ testCase: FreshnessCase) {
        let directives = SharedCacheDirectives(parsing: testCase.requestCacheControl)
        #expect(SharedCachePolicy.isFresh(lifetime: .seconds(testCase.lifetime), age: .seconds(testCase.age), request: directives) == testCase.expected)
    }

    @Test(arguments: [
        FreshnessCase("max-stale", lifetime: 60, age: 10_000, expected: true),
        FreshnessCase("max-stale=10", lifetime: 60, age: 65, expected: true),
        FreshnessCase("max-stale=10", lifetime: 60, age: 70, expected: true),
        FreshnessCase("max-stale=10", lifetime: 60, age: 75, expected: false),
        FreshnessCase("", lifetime: 60, age: 65, expected: false),
        FreshnessCase("max-stale, no-cache", lifetime: 60, age: 65, expected: false),
        FreshnessCase("max-stale", lifetime: 60, age: 65, responseAllowsStale: false, expected: false),
    ])
    func mayServeStale(_ testCase: FreshnessCase) {
        let directives = SharedCacheDirectives(parsing: testCase.requestCacheControl)
        let allowed = SharedCachePolicy.mayServeStale(
            lifetime: .seconds(testCase.lifetime), age: .seconds(testCase.age),
            responseAllowsStale: testCase.responseAllowsStale, request: directives
        )
        #expect(allowed == testCase.expected)
    }

    // MARK: Vary (§4.1)

    @Test func varyValuesKeepAbsentFieldsAsNil() {
        let request = makeRequest([.acceptEncoding: "gzip"])
        let values = SharedCachePolicy.varyValues(names: ["Accept-Encoding", "accept-language"], request: request)
        #expect(values.count == 2)
        #expect(values["accept-encoding"] == .some("gzip"))
        #expect(values["accept-language"] == .some(nil))
    }

    @Test(arguments: [
        VaryCase("same value", stored: ["accept-encoding": "gzip"], [HTTPField(name: .acceptEncoding, value: "gzip")], expected: true),
        VaryCase("different value", stored: ["accept-encoding": "gzip"], [HTTPField(name: .acceptEncoding, value: "br")], expected: false),
        VaryCase("values compared exactly", stored: ["accept-encoding": "gzip"], [HTTPField(name: .acceptEncoding, value: "GZIP")], expected: false),
        VaryCase("absent from both", stored: ["accept-language": nil], [HTTPField(name: .acceptEncoding, value: "gzip")], expected: true),
        VaryCase("absent from the request only", stored: ["accept-encoding": "gzip"], [], expected: false),
        VaryCase("absent from the stored request only", stored: ["accept-encoding": nil], [HTTPField(name: .acceptEncoding, value: "gzip")], expected: false),
        VaryCase("field lines combined with a comma", stored: ["accept-encoding": "gzip, br"],
                 [HTTPField(name: .acceptEncoding, value: "gzip"), HTTPField(name: .acceptEncoding, value: "br")], expected: true),
        VaryCase("Cookie lines combined with a semicolon (kept as their digest)", stored: ["cookie": "sha256:" + SHA256.hexDigest("a=1; b=2")],
                 [HTTPField(name: .cookie, value: "a=1"), HTTPField(name: .cookie, value: "b=2")], expected: true),
        VaryCase("values trimmed", stored: ["accept-encoding": "gzip"], [HTTPField(name: .acceptEncoding, value: "  gzip\t")], expected: true),
        VaryCase("every field must match", stored: ["accept-encoding": "gzip", "origin": "https://a.test"],
                 [HTTPField(name: .acceptEncoding, value: "gzip"), HTTPField(name: .origin, value: "https://b.test")], expected: false),
        VaryCase("no Vary", stored: [:], [HTTPField(name: .acceptEncoding, value: "gzip")], expected: true),
    ])
    func matchesVary(_ testCase: VaryCase) {
        let request = makeRequest(HTTPFields(testCase.requestFields))
        #expect(SharedCachePolicy.matchesVary(storedRequestValues: testCase.stored, request: request) == testCase.expected)
    }

    @Test func varyValuesRoundTripThroughMatchesVary() {
        let first = makeRequest([.acceptEncoding: "gzip", .acceptLanguage: "fr"])
        let stored = SharedCachePolicy.varyValues(names: ["accept-encoding", "accept-language", "origin"], request: first)
        #expect(SharedCachePolicy.matchesVary(storedRequestValues: stored, request: first))
        #expect(!SharedCachePolicy.matchesVary(storedRequestValues: stored, request: makeRequest([.acceptEncoding: "gzip", .acceptLanguage: "de"])))
        #expect(!SharedCachePolicy.matchesVary(storedRequestValues: stored, request: makeRequest([.acceptEncoding: "gzip", .acceptLanguage: "fr", .origin: "https://a.test"])))
    }

    // MARK: Conditional requests (RFC 9110 §13.1)

    @Test(arguments: [
        ConditionalCase("strong match", [.ifNoneMatch: "\"v1\""], etag: "\"v1\"", expected: true),
        ConditionalCase("weak request tag, strong stored", [.ifNoneMatch: "W/\"v1\""], etag: "\"v1\"", expected: true),
        ConditionalCase("strong request tag, weak stored", [.ifNoneMatch: "\"v1\""], etag: "W/\"v1\"", expected: true),
        ConditionalCase("no match", [.ifNoneMatch: "\"v2\""], etag: "\"v1\"", expected: false),
        ConditionalCase("match in a list", [.ifNoneMatch: "\"v2\", W/\"v1\""], etag: "\"v1\"", expected: true),
        ConditionalCase("comma inside a tag", [.ifNoneMatch: "\"a,b\""], etag: "\"a,b\"", expected: true),
        ConditionalCase("a tag's half is no match", [.ifNoneMatch: "\"a,b\""], etag: "\"a\"", expected: false),
        ConditionalCase("star", [.ifNoneMatch: "*"], etag: nil, expected: true),
        ConditionalCase("no stored ETag", [.ifNoneMatch: "\"v1\""], etag: nil, lastModified: httpDate(-100), expected: false),
        ConditionalCase("If-None-Match wins over If-Modified-Since",
                        [.ifNoneMatch: "\"v2\"", .ifModifiedSince: httpDate(0)], etag: "\"v1\"", lastModified: httpDate(-100), expected: false),
        ConditionalCase("not modified since", [.ifModifiedSince: httpDate(0)], lastModified: httpDate(-100), expected: true),
        ConditionalCase("modified at the same second", [.ifModifiedSince: httpDate(0)], lastModified: httpDate(0), expected: true),
        ConditionalCase("modified since", [.ifModifiedSince: httpDate(-200)], lastModified: httpDate(-100), expected: false),
        ConditionalCase("invalid If-Modified-Since", [.ifModifiedSince: "yesterday"], lastModified: httpDate(-100), expected: false),
        ConditionalCase("no stored Last-Modified", [.ifModifiedSince: httpDate(0)], etag: "\"v1\"", expected: false),
        ConditionalCase("not conditional", [:], etag: "\"v1\"", lastModified: httpDate(-100), expected: false),
        ConditionalCase("HEAD", [.ifNoneMatch: "\"v1\""], method: .head, etag: "\"v1\"", expected: true),
        ConditionalCase("POST", [.ifNoneMatch: "\"v1\""], method: .post, etag: "\"v1\"", expected: false),
    ])
    func notModified(_ testCase: ConditionalCase) {
        let request = makeRequest(method: testCase.method, testCase.fields)
        #expect(SharedCachePolicy.notModified(request: request, etag: testCase.etag, lastModified: testCase.lastModified) == testCase.expected)
    }

    @Test func entityTagsReadsAListWithQuotedCommas() {
        #expect(SharedCachePolicy.entityTags(in: " \"a\", W/\"b,c\" ,,\"d\"") == ["\"a\"", "W/\"b,c\"", "\"d\""])
        #expect(SharedCachePolicy.entityTags(in: "\"a\", \"unterminated") == ["\"a\""])
        #expect(SharedCachePolicy.entityTags(in: "bare, \"q\"") == ["bare", "\"q\""])
    }

    // MARK: Invalidation (§4.4)

    @Test(arguments: [
        InvalidationCase("POST 201 with a Location", method: .post, status: .created, [.location: "/items/7"], expected: ["/a?b=1", "/items/7"]),
        InvalidationCase("PUT 204 with an absolute Content-Location", method: .put, status: .noContent,
                         [.contentLocation: "http://example.test/c?d=2"], expected: ["/a?b=1", "/c?d=2"]),
        InvalidationCase("Location on another host ignored", method: .post, status: .seeOther,
                         [.location: "http://other.test/x", .contentLocation: "/y"], expected: ["/a?b=1", "/y"]),
        InvalidationCase("Location on another port ignored", method: .post, status: .created, [.location: "http://example.test:8080/x"], expected: ["/a?b=1"]),
        InvalidationCase("network-path Location, host in another case", method: .post, status: .created, [.location: "//EXAMPLE.test/x"], expected: ["/a?b=1", "/x"]),
        InvalidationCase("relative Location resolved against the request", method: .patch, status: .ok, path: "/dir/a?b=1",
                         [.location: "c?d=2"], expected: ["/dir/a?b=1", "/dir/c?d=2"]),
        InvalidationCase("the request's own path once", method: .delete, status: .ok, [.contentLocation: "/a?b=1"], expected: ["/a?b=1"]),
        InvalidationCase("an unknown method is unsafe", method: HTTPRequest.Method("PURGE"), status: .ok, [:], expected: ["/a?b=1"]),
        InvalidationCase("3xx invalidates", method: .post, status: .found, [:], expected: ["/a?b=1"]),
        InvalidationCase("GET invalidates nothing", method: .get, status: .ok, [.location: "/x"], expected: []),
        InvalidationCase("OPTIONS invalidates nothing", method: .options, status: .ok, [:], expected: []),
        InvalidationCase("4xx invalidates nothing", method: .post, status: .notFound, [.location: "/x"], expected: []),
        InvalidationCase("5xx invalidates nothing", method: .delete, status: .internalServerError, [:], expected: []),
    ])
    func invalidatedTargets(_ testCase: InvalidationCase) throws {
        let method = try #require(testCase.method)
        let request = HTTPRequest(method: method, scheme: "http", authority: "example.test", path: testCase.path)
        let response = HTTPResponse(status: testCase.status, headerFields: testCase.fields)
        #expect(SharedCachePolicy.invalidatedTargets(request: request, response: response) == testCase.expected)
    }

    @Test func withoutAnAuthorityOnlyTheRequestPathIsInvalidated() {
        let request = HTTPRequest(method: .post, scheme: "http", authority: nil, path: "/a")
        let response = HTTPResponse(status: .created, headerFields: [.location: "/b", .contentLocation: "http://example.test/c"])
        #expect(SharedCachePolicy.invalidatedTargets(request: request, response: response) == ["/a"])
    }
}

// MARK: - Fixtures

/// The instant the request was sent; the response arrives two seconds later.
private let requestTime = Date(timeIntervalSince1970: 1_700_000_000)
private let responseTime = requestTime + 2

/// An HTTP-date `offset` seconds after `requestTime`.
private func httpDate(_ offset: TimeInterval) -> String {
    HTTPDate.string(from: requestTime + offset)
}

/// A request to `http://example.test/a?b=1`.
private func makeRequest(method: HTTPRequest.Method = .get, _ fields: HTTPFields = [:]) -> HTTPRequest {
    HTTPRequest(method: method, scheme: "http", authority: "example.test", path: "/a?b=1", headerFields: fields)
}

/// The plan for storing `response` to a plain GET, or `nil` when it is not stored.
private func storedPlan(of response: HTTPResponse) -> StoredResponsePlan? {
    guard case let .store(plan) = SharedCachePolicy.storability(request: makeRequest(), response: response, responseTime: responseTime)
    else { return nil }
    return plan
}

/// Field names swift-http-types does not define.
private enum Names {
    static let cacheTag = HTTPField.Name("Cache-Tag")!
    static let surrogateKey = HTTPField.Name("Surrogate-Key")!
}

extension SharedCachePolicyTests {
    /// A `Cache-Control` value and the directives it parses to (built from no directives by `configure`).
    struct DirectivesCase: Sendable, CustomTestStringConvertible {
        let fieldValue: String
        let expected: SharedCacheDirectives
        var testDescription: String { fieldValue.isEmpty ? "(empty)" : fieldValue }

        init(_ fieldValue: String, _ configure: (inout SharedCacheDirectives) -> Void) {
            self.fieldValue = fieldValue
            var expected = SharedCacheDirectives()
            configure(&expected)
            self.expected = expected
        }
    }

    /// A response (to a plain GET unless `request` says otherwise) and whether it is stored.
    struct StorabilityCase: Sendable, CustomTestStringConvertible {
        enum Expected: Sendable {
            case store(lifetime: Int64, mayServeStale: Bool = true)
            case doNotStore
        }

        let name: String
        let request: HTTPRequest
        let response: HTTPResponse
        let expected: Expected
        var testDescription: String { name }

        init(_ name: String, request: HTTPRequest? = nil, status: HTTPResponse.Status = .ok, response fields: HTTPFields, expected: Expected) {
            self.name = name
            self.request = request ?? makeRequest()
            self.response = HTTPResponse(status: status, headerFields: fields)
            self.expected = expected
        }
    }

    /// Response fields and the initial age, with the request sent at `requestTime` seconds after the
    /// fixed `requestTime` (0 unless said) and the response received at +2.
    struct AgeCase: Sendable, CustomTestStringConvertible {
        let name: String
        let fields: HTTPFields
        let requestTime: TimeInterval
        let expected: Int64
        var testDescription: String { name }

        init(_ name: String, _ fields: HTTPFields, requestTime: TimeInterval = 0, expected: Int64) {
            self.name = name
            self.fields = fields
            self.requestTime = requestTime
            self.expected = expected
        }
    }

    /// A request's `Cache-Control`, a stored response's lifetime and age (seconds), and the answer.
    struct FreshnessCase: Sendable, CustomTestStringConvertible {
        let requestCacheControl: String
        let lifetime: Int64
        let age: Int64
        let responseAllowsStale: Bool
        let expected: Bool
        var testDescription: String {
            "\"\(requestCacheControl)\", lifetime \(lifetime)s, age \(age)s\(responseAllowsStale ? "" : ", must revalidate")"
        }

        init(_ requestCacheControl: String, lifetime: Int64, age: Int64, responseAllowsStale: Bool = true, expected: Bool) {
            self.requestCacheControl = requestCacheControl
            self.lifetime = lifetime
            self.age = age
            self.responseAllowsStale = responseAllowsStale
            self.expected = expected
        }
    }

    /// The selecting values stored with a response, a new request's fields, and whether they match.
    struct VaryCase: Sendable, CustomTestStringConvertible {
        let name: String
        let stored: [String: String?]
        let requestFields: [HTTPField]
        let expected: Bool
        var testDescription: String { name }

        init(_ name: String, stored: [String: String?], _ requestFields: [HTTPField], expected: Bool) {
            self.name = name
            self.stored = stored
            self.requestFields = requestFields
            self.expected = expected
        }
    }

    /// A client's conditional request, the stored validators, and whether the answer is 304.
    struct ConditionalCase: Sendable, CustomTestStringConvertible {
        let name: String
        let fields: HTTPFields
        let method: HTTPRequest.Method
        let etag: String?
        let lastModified: String?
        let expected: Bool
        var testDescription: String { name }

        init(_ name: String, _ fields: HTTPFields, method: HTTPRequest.Method = .get, etag: String? = nil, lastModified: String? = nil, expected: Bool) {
            self.name = name
            self.fields = fields
            self.method = method
            self.etag = etag
            self.lastModified = lastModified
            self.expected = expected
        }
    }

    /// An exchange on `http://example.test` and the targets it invalidates.
    struct InvalidationCase: Sendable, CustomTestStringConvertible {
        let name: String
        let method: HTTPRequest.Method?
        let status: HTTPResponse.Status
        let path: String
        let fields: HTTPFields
        let expected: [String]
        var testDescription: String { name }

        init(_ name: String, method: HTTPRequest.Method?, status: HTTPResponse.Status, path: String = "/a?b=1", _ fields: HTTPFields, expected: [String]) {
            self.name = name
            self.method = method
            self.status = status
            self.path = path
            self.fields = fields
            self.expected = expected
        }
    }
}
