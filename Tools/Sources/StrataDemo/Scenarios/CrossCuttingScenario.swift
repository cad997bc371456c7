import CrossCuttingExample
import DemoServer
import Dispatch
import Foundation
import Logging
@_spi(StrataInternals) import Strata

/// The S3 CrossCutting scenario, step by step: an item service that knows nothing of analytics or threads, and
/// the decorators that add both, wired by `UIComposer`. Items come from the demo server's feed.
public struct CrossCuttingScenario: Sendable {
    /// What one step of the scenario observed.
    public struct Step: Sendable, Equatable {
        public var title: String
        /// What was loaded: item titles, or the user's name.
        public var loaded: [String]
        /// The events the in-memory tracker received during this step.
        public var tracked: [[String]]
        /// The lines the logging tracker wrote during this step.
        public var logged: [String]
        /// Requests sent to the server during this step.
        public var requestsSent: Int
        /// For delivery steps: whether the result arrived on the main queue (the main actor's).
        public var deliveredOnMainQueue: Bool?
        /// For the step that asks from the main actor: whether the result arrived before the call that
        /// asked for it returned (delivered synchronously, not dispatched).
        public var deliveredBeforeCallReturned: Bool?

        public init(
            title: String, loaded: [String], tracked: [[String]] = [], logged: [String] = [],
            requestsSent: Int = 0, deliveredOnMainQueue: Bool? = nil, deliveredBeforeCallReturned: Bool? = nil
        ) {
            self.title = title
            self.loaded = loaded
            self.tracked = tracked
            self.logged = logged
            self.requestsSent = requestsSent
            self.deliveredOnMainQueue = deliveredOnMainQueue
            self.deliveredBeforeCallReturned = deliveredBeforeCallReturned
        }
    }

    public init() {}

    /// Runs the scenario, writing each line of the narration through `write`, and returns what each step observed.
    public func run(write: @escaping @Sendable (String) -> Void) async throws -> [Step] {
        let server = try await DemoServer.start()
        let client = CountingHTTPClient()
        let service = FeedTitlesService(feedURL: server.feedURL, client: client)
        let memory = InMemoryTracker()
        let logs = NarratedLog()
        let logging = LoggingTracker(logger: logs.logger)
        let trackers: [any Tracker] = [memory, logging]

        write("Strata demo: cross-cutting concerns as decorators (S3 CrossCutting)")
        write("  items      FeedTitlesService: the titles of \(server.feedURL.absoluteString) (Hummingbird, in this process)")
        write("  trackers   CompositeTracker([InMemoryTracker, LoggingTracker (swift-log)])")
        write("  user       a completion-handler UserDataLoader that answers on a background queue")

        var steps: [Step] = []
        func record(_ step: Step, _ lines: [(String, String)]) {
            steps.append(step)
            write("")
            write("\(steps.count). \(step.title)")
            for (label, text) in lines {
                write("   \(label.padding(toLength: 10, withPad: " ", startingAt: 0)) \(text)")
            }
        }
        /// Runs `load`, and reports what it loaded and what the trackers saw meanwhile.
        func itemsStep(_ title: String, _ situation: String, _ load: () async -> [String]) async {
            let sentBefore = client.requestCount
            let trackedBefore = await memory.events.count
            _ = logs.drain()
            let items = await load()
            let tracked = Array(await memory.events.dropFirst(trackedBefore))
            let logged = logs.drain().map(\.text)
            let analytics = tracked.isEmpty && logged.isEmpty
                ? "nothing tracked"
                : "in-memory tracker ✓ \(tracked.map { "\($0.count) values" }.joined(separator: ", ")) · log ✓ \(logged.joined(separator: " | "))"
            let sent = client.requestCount - sentBefore
            record(
                Step(title: title, loaded: items, tracked: tracked, logged: logged, requestsSent: sent),
                [("situation", situation), ("loaded", describe(items)),
                 ("network", "\(sent) request\(sent == 1 ? "" : "s") sent"), ("analytics", analytics)])
        }

        await itemsStep("The item service alone", "no decorator: the service knows nothing of analytics") {
            await service.loadItem()
        }
        await itemsStep("Behind AnalyticsDecorator", "AnalyticsDecorator(decoratee: service, tracker: CompositeTracker(…))") {
            await AnalyticsDecorator(decoratee: service, tracker: CompositeTracker(trackers)).loadItem()
        }
        if #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) {
            await itemsStep("The items screen, composed by UIComposer", "UIComposer.itemsScreen(service:trackers:) → ItemsViewModel (@MainActor)") {
                let viewModel = await UIComposer.itemsScreen(service: service, trackers: trackers)
                await viewModel.load()
                return await viewModel.items
            }
        }

        let backgroundLoader = BackgroundUserLoader()
        let undecorated = await deliver(from: backgroundLoader)
        record(
            Step(title: "User data, undecorated", loaded: [undecorated.name],
                 deliveredOnMainQueue: undecorated.onMainQueue),
            [("situation", "the loader calls back on the background queue where its work ended"),
             ("loaded", "user \(undecorated.name)"),
             ("delivered", describeDelivery(undecorated.onMainQueue, immediately: false))])

        let dispatched = await deliver(from: MainDispatchQueueDecorator(decoratee: backgroundLoader))
        record(
            Step(title: "Behind MainDispatchQueueDecorator", loaded: [dispatched.name],
                 deliveredOnMainQueue: dispatched.onMainQueue),
            [("situation", "the same loader; the decorator sees the answer is off main"),
             ("loaded", "user \(dispatched.name)"),
             ("delivered", describeDelivery(dispatched.onMainQueue, immediately: false))])

        let immediate = await MainActor.run { () -> (name: String?, onMainQueue: Bool) in
            let seen = Locked<(name: String?, onMainQueue: Bool)>((nil, false))
            MainDispatchQueueDecorator(decoratee: OnCallerUserLoader()).fetchUserData { result in
                seen.withLock { $0 = ((try? result.get())?.name, MainDispatchQueueDecorator.isOnMainQueue) }
            }
            return seen.withLock { $0 }
        }
        record(
            Step(title: "Already on main", loaded: immediate.name.map { [$0] } ?? [],
                 deliveredOnMainQueue: immediate.onMainQueue, deliveredBeforeCallReturned: immediate.name != nil),
            [("situation", "called from the main actor; the loader answers at once, from memory"),
             ("loaded", "user \(immediate.name ?? "—")"),
             ("delivered", describeDelivery(immediate.onMainQueue, immediately: immediate.name != nil))])

        let sink = Locked<Bool?>(nil)
        let sentBefore = client.requestCount
        let titles = try await Task.detached {
            try await service.loader
                .deliveredOnMainActor { _ in sink.withLock { $0 = MainDispatchQueueDecorator.isOnMainQueue } }
                .load()
        }.value
        let onMain = sink.withLock { $0 } ?? false
        let sent = client.requestCount - sentBefore
        record(
            Step(title: "Swift concurrency: deliveredOnMainActor", loaded: titles, requestsSent: sent,
                 deliveredOnMainQueue: onMain),
            [("situation", "a Strata loader, awaited off the main actor, with a @MainActor sink"),
             ("loaded", describe(titles)),
             ("network", "\(sent) request\(sent == 1 ? "" : "s") sent"),
             ("delivered", onMain ? "to the sink on the main actor, before load() returned" : "off the main actor ✗")])

        await server.stop()
        write("")
        write("The service never changed: analytics and threading were added around it, in one composer.")
        return steps
    }

    /// Asks `loader` for the user and waits for the completion, noting where it ran.
    private func deliver(from loader: some UserDataLoader) async -> (name: String, onMainQueue: Bool) {
        await withCheckedContinuation { continuation in
            loader.fetchUserData { result in
                let name = (try? result.get())?.name ?? "—"
                continuation.resume(returning: (name, MainDispatchQueueDecorator.isOnMainQueue))
            }
        }
    }

    private func describe(_ items: [String]) -> String {
        let first = items.first.map { " — \"\($0)\"" } ?? ""
        return "\(items.count) item\(items.count == 1 ? "" : "s")\(first)"
    }

    private func describeDelivery(_ onMainQueue: Bool, immediately: Bool) -> String {
        switch (onMainQueue, immediately) {
        case (true, true): "on the main queue, immediately: before fetchUserData returned"
        case (true, false): "on the main queue, dispatched with DispatchQueue.main.async"
        case (false, _): "off the main queue (a background thread): not safe for the screen"
        }
    }
}

/// The demo's item service: the titles of the demo server's feed, through a Strata loader.
private struct FeedTitlesService: ItemService {
    let loader: MapLoader<DecodingLoader<HTTPLoader<Void>, [FeedItem]>, [String]>

    init(feedURL: URL, client: any HTTPTransport) {
        loader = HTTPLoader(url: feedURL, transport: client).decoding([FeedItem].self).map { $0.map(\.title) }
    }

    /// The article's service cannot fail: a failed load shows nothing.
    func loadItem() async -> [String] {
        (try? await loader.load()) ?? []
    }
}

/// A user loader that answers on a global (background) queue, as network code often does.
private struct BackgroundUserLoader: UserDataLoader {
    func fetchUserData(completion: @escaping @Sendable (Result<UserData, any Error>) -> Void) {
        DispatchQueue.global().async { completion(.success(demoUser)) }
    }
}

/// A user loader that answers at once, on the caller's thread (a value it already has in memory).
private struct OnCallerUserLoader: UserDataLoader {
    func fetchUserData(completion: @escaping @Sendable (Result<UserData, any Error>) -> Void) {
        completion(.success(demoUser))
    }
}

private let demoUser = UserData(name: "Ada", email: "ada@example.com")
