import Dispatch
import Foundation
import CrossCuttingExample
@_spi(StrataInternals) import Strata

let sampleItems = ["Decorators", "Composites", "Offline first"]
let alice = UserData(name: "Alice", email: "alice@example.com")

/// A service that answers with fixed items and counts its loads.
actor ItemServiceStub: ItemService {
    let items: [String]
    private(set) var loadCount = 0

    init(items: [String] = sampleItems) {
        self.items = items
    }

    func loadItem() -> [String] {
        loadCount += 1
        return items
    }
}

/// A tracker that records every event, in order.
actor TrackerSpy: Tracker {
    private(set) var events: [[String]] = []

    func track(values: [String]) {
        events.append(values)
    }
}

/// One log shared by several collaborators, so a test can assert the order in which they were used.
actor Journal {
    private(set) var entries: [String] = []

    func write(_ entry: String) {
        entries.append(entry)
    }
}

/// A service and a tracker that write to one journal.
struct JournalingService: ItemService {
    let journal: Journal
    let items: [String]

    func loadItem() async -> [String] {
        await journal.write("load")
        return items
    }
}

struct JournalingTracker: Tracker {
    let journal: Journal
    let name: String

    func track(values: [String]) async {
        await journal.write("\(name) \(values)")
    }
}

/// A service that waits, mid-load, until the test lets it answer.
actor HeldItemService: ItemService {
    private var started: [CheckedContinuation<Void, Never>] = []
    private var isStarted = false
    private var release: CheckedContinuation<[String], Never>?
    /// How many loads were asked for.
    private(set) var calls = 0

    func loadItem() async -> [String] {
        calls += 1
        isStarted = true
        started.forEach { $0.resume() }
        started = []
        return await withCheckedContinuation { release = $0 }
    }

    /// Suspends until `loadItem()` has started.
    func waitUntilStarted() async {
        if isStarted { return }
        await withCheckedContinuation { started.append($0) }
    }

    /// Lets the waiting load answer with `items`.
    func answer(_ items: [String]) {
        release?.resume(returning: items)
        release = nil
    }
}

/// Where a ``UserDataLoaderStub`` calls its completion.
enum CompletionThread: Sendable {
    /// Synchronously, on the thread that called `fetchUserData`.
    case caller
    /// Later, on a global (background) queue.
    case background
}

/// A completion-handler loader answering with a fixed result from the thread the test chooses.
struct UserDataLoaderStub: UserDataLoader {
    var result: Result<UserData, any Error> = .success(alice)
    var completesOn: CompletionThread

    func fetchUserData(completion: @escaping @Sendable (Result<UserData, any Error>) -> Void) {
        switch completesOn {
        case .caller: completion(result)
        case .background: DispatchQueue.global().async { completion(result) }
        }
    }
}

/// What a completion observed when it ran.
struct Delivery: Sendable {
    var result: Result<UserData, any Error>
    /// The test's own tag of the queue the completion ran on (`"main"` for the main queue), if any.
    var queueTag: String?

    var onMainQueue: Bool { queueTag == "main" }

    init(_ result: Result<UserData, any Error>) {
        self.result = result
        self.queueTag = currentQueueTag()
    }
}

/// A queue-specific key the tests set on the queues they use, to see where a completion ran.
///
/// The tests ask "which queue?", not `Thread.isMainThread`: under `swift test` on Linux the async
/// `main` calls `dispatch_main()`, which retires the main thread, and the main queue (with the
/// `MainActor`) then runs on a worker thread, where `Thread.isMainThread` is `false`.
let testQueueTag = DispatchSpecificKey<String>()

/// The main queue, tagged `"main"` under ``testQueueTag`` on first use.
let mainQueueTagged: Void = DispatchQueue.main.setSpecific(key: testQueueTag, value: "main")

/// The test tag of the queue the caller runs on.
func currentQueueTag() -> String? {
    _ = mainQueueTagged
    return DispatchQueue.getSpecific(key: testQueueTag)
}

/// A serial queue tagged with `label` under ``testQueueTag``.
func makeTaggedQueue(_ label: String) -> DispatchQueue {
    let queue = DispatchQueue(label: label)
    queue.setSpecific(key: testQueueTag, value: label)
    return queue
}

/// Calls `fetchUserData` and suspends until the completion has run, reporting where it ran.
func fetch(_ loader: some UserDataLoader) async -> Delivery {
    await withCheckedContinuation { continuation in
        loader.fetchUserData { result in
            continuation.resume(returning: Delivery(result))
        }
    }
}

/// A flag the completion sets, read by the test right after `fetchUserData` returns.
final class DeliveryRecorder: Sendable {
    private let state = Locked<Delivery?>(nil)

    var delivery: Delivery? { state.withLock { $0 } }

    var completion: @Sendable (Result<UserData, any Error>) -> Void {
        { [self] result in
            let delivery = Delivery(result)
            state.withLock { $0 = delivery }
        }
    }
}
