import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// `retry` must not send a non-idempotent request twice, and `coalesced` must not merge two.
@Suite("Non-idempotent requests under retry and coalesced")
struct IdempotencyTests {
    let clock = ManualClock()
    let url = URL(string: "https://api.example.com/posts")!

    var unavailable: HTTPReply { HTTPReply(url: url, statusCode: 503) }
    var created: HTTPReply { HTTPReply(url: url, statusCode: 201) }

    /// Runs `load` in a task, advancing the clock by `wait` whenever the loader sleeps, `waits` times.
    func drive<T: Sendable>(
        waits: Int, _ load: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let task = Task { try await load() }
        for _ in 0..<waits {
            try await clock.waitForSleepers(count: 1)
            clock.advance(by: .seconds(1))
        }
        return try await task.value
    }

    @Test func aPOSTWithoutAKeyIsNotRetriedAfterA5xx() async throws {
        let client = WriteScriptClient([.success(unavailable), .success(created)])
        let sut = HTTPLoader<Int>.postJSON(to: url, transport: client)
            .retrying(.constant(attempts: 3, delay: .zero)).environment(\.clock, clock)
        await #expect { try await sut.load(1) } throws: { ($0 as? HTTPError)?.statusCode == 503 }
        #expect(client.requests.count == 1, "a second POST could create the object twice")
    }

    @Test func aPOSTThatTimedOutIsNotRetriedThroughAChain() async throws {
        // The timeout's error does not know the request; the attempt context does. (No backoff, so
        // code that did retry would not wait on the clock but fail the expectations below.)
        let client = WriteScriptClient([.hold, .success(created)])
        let sut = HTTPLoader<Int>.postJSON(to: url, transport: client)
            .map { $0.status.code }
            .timingOut(after: .seconds(1)).environment(\.clock, clock)
            .retrying(.constant(attempts: 3, delay: .zero)).environment(\.clock, clock)
        await #expect(throws: TimeoutError.self) { try await drive(waits: 1) { try await sut.load(1) } }
        #expect(client.requests.count == 1)
        client.releaseAll()  // let the abandoned request end
    }

    @Test func aPOSTWithAnIdempotencyKeyIsRetriedWithTheSameKey() async throws {
        let client = WriteScriptClient([.success(unavailable), .success(unavailable), .success(created)])
        let sut = HTTPLoader<Int>.postJSON(to: url, transport: client).addingIdempotencyKey()
            .retrying(.constant(attempts: 3, delay: .seconds(1))).environment(\.clock, clock)
        let response = try await drive(waits: 2) { try await sut.load(1) }
        #expect(response.status.code == 201)
        let keys = client.requests.map { $0.headers["Idempotency-Key"] }
        #expect(keys.count == 3)
        #expect(keys.allSatisfy { $0 != nil && $0 == keys[0] }, "one logical load, one key")

        // The next logical load gets a key of its own.
        client.script([.success(created)])
        _ = try await sut.load(2)
        #expect(client.requests[3].headers["Idempotency-Key"] != keys[0])
    }

    @Test func aKeyTheCallerSetIsKeptAndMakesThePOSTRetriable() async throws {
        let client = WriteScriptClient([.success(unavailable), .success(created)])
        let sut = HTTPLoader<Int>.postJSON(to: url, headerFields: fields(["idempotency-key": "mine"]), transport: client)
            .retrying(.constant(attempts: 2, delay: .seconds(1))).environment(\.clock, clock)
        _ = try await drive(waits: 1) { try await sut.load(1) }
        #expect(client.requests.map { $0.headers["idempotency-key"] } == ["mine", "mine"])
    }

    @Test func thePolicyCanOptIn() async throws {
        let client = WriteScriptClient([.success(unavailable), .success(created)])
        var policy = RetryPolicy.constant(attempts: 2, delay: .seconds(1))
        policy.retriesNonIdempotentRequests = true
        let sut = HTTPLoader<Int>.postJSON(to: url, method: .patch, transport: client).retrying(policy).environment(\.clock, clock)
        _ = try await drive(waits: 1) { try await sut.load(1) }
        #expect(client.requests.count == 2)
    }

    @Test(arguments: ["GET", "PUT", "DELETE"])
    func idempotentMethodsAreRetried(method: String) async throws {
        let client = WriteScriptClient([.success(unavailable), .success(created)])
        let sut = HTTPLoader<Void>(transport: client) { HTTPRequest(method: HTTPRequest.Method(method)!, url: url) }
            .retrying(.constant(attempts: 2, delay: .seconds(1))).environment(\.clock, clock)
        _ = try await drive(waits: 1) { try await sut.load() }
        #expect(client.requests.count == 2)
        #expect(client.requests[0].headers["Idempotency-Key"] == nil)
    }

    @Test func anOuterRetryKeepsTheKeyAndSeesTheWriteOfAnInnerOne() async throws {
        let client = WriteScriptClient([.success(unavailable), .success(unavailable), .success(created)])
        let sut = HTTPLoader<Int>.postJSON(to: url, transport: client)
            .retrying(.constant(attempts: 1, delay: .zero)).environment(\.clock, clock)
            .retrying(.constant(attempts: 3, delay: .zero)).environment(\.clock, clock)
        await #expect(throws: HTTPError.self) { try await sut.load(1) }
        #expect(client.requests.count == 1)
    }

    // MARK: coalesced

    @Test func twoConcurrentIdenticalPOSTsBothReachTheServer() async throws {
        guard #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) else { return }
        let client = WriteScriptClient([.hold, .success(created)])
        let sut = HTTPLoader<Int>.postJSON(to: url, transport: client).coalesced()
        let first = Task { try await sut.load(1) }
        await client.waitForRequests(count: 1)
        // Runs until it first suspends: it has joined the first load, or sent its own request.
        let second = Task.immediate { try await sut.load(1) }
        client.releaseAll(with: .success(created))
        _ = try await (first.value, second.value)
        #expect(client.requests.count == 2)
    }

    @Test func callersThatJoinedBeforeTheWriteWasSentSendTheirOwn() async throws {
        // The second caller joins while the shared load's request is held; when the load reports a write,
        // the joiner starts over and sends its own.
        let gate = WriteScriptClient([.hold])
        let sends = Locked(0)
        let base = ClosureLoader<Int, Int>("writer") { _ in
            _ = try await gate.send(HTTPRequest(method: .get, url: url), body: nil, options: HTTPRequestOptions())   // held until released
            LoadAttempt.noteNonIdempotentRequest(hasIdempotencyKey: false)
            return sends.withLock { $0 += 1; return $0 }
        }
        let sut = base.coalesced()
        let first = Task { try await sut.load(1) }
        await gate.waitForRequests(count: 1)   // the leader's load is held at its request
        let second = Task { try await sut.load(1) }
        try await sut.waitForWaiters(count: 2)
        gate.script([.success(created)])      // the joiner's own pass goes straight through
        gate.releaseAll(with: .success(created))
        let results = try await Set([first.value, second.value])
        #expect(results == [1, 2], "each caller's write was sent")
    }

    /// A writer that takes its context (``Loader/load(_:in:)``) reports its write with it: the flight
    /// hears of it although nothing is bound as the task's.
    struct ContextWriter: Loader {
        let gate: WriteScriptClient
        let sends: Locked<Int>
        let url: URL
        func load(_ input: Int) async throws -> Int { try await load(input, in: .current) }
        func load(_ input: Int, in context: LoadContext) async throws -> Int {
            _ = try await gate.send(HTTPRequest(method: .get, url: url), body: nil, options: HTTPRequestOptions())
            LoadAttempt.noteNonIdempotentRequest(hasIdempotencyKey: false, in: context)
            return sends.withLock { $0 += 1; return $0 }
        }
    }

    @Test func aWriterThatTakesItsContext_isNotSharedEither() async throws {
        let gate = WriteScriptClient([.hold])
        let sends = Locked(0)
        let sut = ContextWriter(gate: gate, sends: sends, url: url).coalesced()
        let first = Task { try await sut.load(1) }
        await gate.waitForRequests(count: 1)
        let second = Task { try await sut.load(1) }
        try await sut.waitForWaiters(count: 2)
        gate.script([.success(created)])
        gate.releaseAll(with: .success(created))
        let results = try await Set([first.value, second.value])
        #expect(results == [1, 2], "each caller's write was sent")
    }

    @Test func readsAreStillShared() async throws {
        let client = WriteScriptClient([.hold])
        let sut = HTTPLoader<Int>.get(transport: client) { _ in url }.coalesced()
        let first = Task { try await sut.load(1) }
        await client.waitForRequests(count: 1)   // the leader's request is held
        let second = Task { try await sut.load(1) }
        try await sut.waitForWaiters(count: 2)
        client.releaseAll(with: .success(created))
        _ = try await (first.value, second.value)
        #expect(client.requests.count == 1)
    }
}

/// An HTTP client that answers from a script, holding the requests scripted `.hold` until released.
final class WriteScriptClient: HTTPTransport, Sendable {
    enum Step: Sendable {
        case success(HTTPReply)
        case failure(HTTPError)
        case hold
    }

    private struct State: Sendable {
        var script: [Step]
        var requests: [SentRequest] = []
        var held: [CheckedContinuation<HTTPReply, any Error>] = []
        var releasedEarly: Result<HTTPReply, any Error>?
        var waiters = CountWaiters()
    }

    private let state: Locked<State>

    init(_ script: [Step]) { state = Locked(State(script: script)) }

    var requests: [SentRequest] { state.withLock { $0.requests } }

    func script(_ steps: [Step]) { state.withLock { $0.script += steps } }

    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        let sent = SentRequest(request: request, body: body, options: options)
        let step = state.withLock { state -> Step in
            state.script.isEmpty ? .failure(.transport(url: sent.url, reason: "unscripted", underlying: nil))
                : state.script.removeFirst()
        }
        switch step {
        case .success(let response):
            record(sent)
            return response
        case .failure(let error):
            record(sent)
            throw error
        case .hold:
            // Registered before the request counts as sent, so `waitForRequests` then `releaseAll`
            // always finds it.
            return try await withCheckedThrowingContinuation { continuation in
                state.withLock { $0.held.append(continuation) }
                record(sent)
            }
        }
    }

    private func record(_ request: SentRequest) {
        state.withLock { state in
            state.requests.append(request)
            state.waiters.resumeReached(state.requests.count)
        }
    }

    func waitForRequests(count: Int) async {
        await withCheckedContinuation { continuation in
            state.withLock { $0.waiters.wait(for: count, current: $0.requests.count, continuation: continuation) }
        }
    }

    /// Answers every held request with `result` (by default a transport failure).
    func releaseAll(with result: Result<HTTPReply, any Error> = .failure(CancellationError())) {
        let held = state.withLock { state in
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume(with: result) }
    }
}
