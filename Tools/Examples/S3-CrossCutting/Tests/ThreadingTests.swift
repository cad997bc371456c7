import Dispatch
import Foundation
import Testing
import CrossCuttingExample
import StrataTesting

/// Delivery on a queue. Several completions here run on the main queue, which Swift Testing's runner
/// services (its async `main` drives the main executor through `dispatch_main()`); the time limit
/// turns a regression into a failure instead of a hang. "On main" is checked as "on the main queue":
/// see ``testQueueTag`` for why not `Thread.isMainThread`.
@Suite("S3 CrossCutting: threading decorators", .timeLimit(.minutes(1)))
struct ThreadingTests {
    // MARK: MainDispatchQueueDecorator

    @Test func undecoratedLoader_completesOffTheMainQueue_soTheDecoratorHasWorkToDo() async {
        let delivery = await fetch(UserDataLoaderStub(completesOn: .background))

        #expect(delivery.queueTag == nil)
    }

    @Test func mainDecorator_deliversABackgroundCompletionOnTheMainQueue() async throws {
        let sut = MainDispatchQueueDecorator(decoratee: UserDataLoaderStub(completesOn: .background))

        let delivery = await fetch(sut)

        #expect(delivery.onMainQueue)
        #expect(try delivery.result.get() == alice)
    }

    @Test func mainDecorator_deliversFailuresOnTheMainQueueToo() async {
        let sut = MainDispatchQueueDecorator(
            decoratee: UserDataLoaderStub(result: .failure(TestError("no user")), completesOn: .background))

        let delivery = await fetch(sut)

        #expect(delivery.onMainQueue)
        #expect(throws: TestError("no user")) { try delivery.result.get() }
    }

    @MainActor
    @Test func mainDecorator_whenTheCompletionIsAlreadyOnMain_deliversItBeforeTheCallReturns() throws {
        try #require(currentQueueTag() == "main", "a @MainActor test runs on the main queue")
        let recorder = DeliveryRecorder()
        let sut = MainDispatchQueueDecorator(decoratee: UserDataLoaderStub(completesOn: .caller))

        sut.fetchUserData(completion: recorder.completion)

        let delivery = try #require(recorder.delivery, "delivered synchronously, not dispatched")
        #expect(delivery.onMainQueue)
    }

    @Test func mainDecorator_whenCalledOffMain_dispatchesEvenASynchronousCompletion() async {
        let sut = MainDispatchQueueDecorator(decoratee: UserDataLoaderStub(completesOn: .caller))

        let delivery = await fetch(sut)

        #expect(delivery.onMainQueue)
    }

    @MainActor
    @Test func twoMainDecorators_bothRecogniseTheMainQueue() throws {
        let (first, second) = (DeliveryRecorder(), DeliveryRecorder())
        let stub = UserDataLoaderStub(completesOn: .caller)
        let (one, other) = (MainDispatchQueueDecorator(decoratee: stub), MainDispatchQueueDecorator(decoratee: stub))

        one.fetchUserData(completion: first.completion)
        other.fetchUserData(completion: second.completion)

        #expect(first.delivery?.onMainQueue == true)
        #expect(second.delivery?.onMainQueue == true)
    }

    @Test func isOnMainQueue_isTrueOnTheMainQueueOnly() async {
        #expect(!MainDispatchQueueDecorator.isOnMainQueue)
        #expect(await MainActor.run { MainDispatchQueueDecorator.isOnMainQueue })
        #expect(await withCheckedContinuation { continuation in
            DispatchQueue.main.async { continuation.resume(returning: MainDispatchQueueDecorator.isOnMainQueue) }
        })
    }

    // MARK: QueueDeliveringDecorator

    @Test func queueDecorator_deliversABackgroundCompletionOnItsQueue() async throws {
        let queue = makeTaggedQueue("target")
        let sut = QueueDeliveringDecorator(decoratee: UserDataLoaderStub(completesOn: .background), queue: queue)

        let delivery = await fetch(sut)

        #expect(delivery.queueTag == "target")
        #expect(try delivery.result.get() == alice)
    }

    @Test func queueDecorator_whenCalledOnItsQueue_deliversASynchronousCompletionBeforeTheCallReturns() async throws {
        let queue = makeTaggedQueue("target")
        let sut = QueueDeliveringDecorator(decoratee: UserDataLoaderStub(completesOn: .caller), queue: queue)

        let deliveredBeforeReturn = await withCheckedContinuation { continuation in
            queue.async {
                let recorder = DeliveryRecorder()
                sut.fetchUserData(completion: recorder.completion)
                continuation.resume(returning: recorder.delivery)
            }
        }

        let delivery = try #require(deliveredBeforeReturn, "delivered synchronously, not dispatched")
        #expect(delivery.queueTag == "target")
    }

    @Test func queueDecorator_whenCalledElsewhere_dispatchesASynchronousCompletionToItsQueue() async throws {
        let queue = makeTaggedQueue("target")
        let sut = QueueDeliveringDecorator(decoratee: UserDataLoaderStub(completesOn: .caller), queue: queue)
        let recorder = DeliveryRecorder()

        queue.suspend()   // nothing runs on the target until the test has looked
        sut.fetchUserData(completion: recorder.completion)
        #expect(recorder.delivery == nil, "not run synchronously on the caller's thread")
        queue.resume()

        let delivery = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: recorder.delivery) }
        }
        #expect(delivery?.queueTag == "target")
    }

    @Test func queueDecorator_knowsItsQueueFromAnyOther() async {
        let (target, other) = (makeTaggedQueue("target"), makeTaggedQueue("other"))
        let sut = QueueDeliveringDecorator(decoratee: UserDataLoaderStub(completesOn: .caller), queue: target)

        #expect(!sut.isOnQueue)
        #expect(await withCheckedContinuation { continuation in target.async { continuation.resume(returning: sut.isOnQueue) } })
        #expect(!(await withCheckedContinuation { continuation in other.async { continuation.resume(returning: sut.isOnQueue) } }))
    }

    @Test func twoDecoratorsOnDifferentQueues_eachDeliverOnTheirOwn() async {
        let (first, second) = (makeTaggedQueue("first"), makeTaggedQueue("second"))
        let stub = UserDataLoaderStub(completesOn: .background)
        // Stacked: the inner one moves the completion to `first`, the outer one on to `second`.
        let sut = QueueDeliveringDecorator(decoratee: QueueDeliveringDecorator(decoratee: stub, queue: first), queue: second)
        let alsoOnFirst = QueueDeliveringDecorator(decoratee: stub, queue: first)

        #expect(await fetch(sut).queueTag == "second")
        #expect(await fetch(alsoOnFirst).queueTag == "first")
    }

    @Test func queueDecoratorOnMain_deliversABackgroundCompletionOnTheMainQueue() async {
        let sut = QueueDeliveringDecorator(decoratee: UserDataLoaderStub(completesOn: .background), queue: .main)

        #expect(await fetch(sut).onMainQueue)
    }
}
