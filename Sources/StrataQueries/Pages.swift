import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// The value of a paged query (a feed): its pages in order, the cursor each was loaded with, and
/// the cursor of the next page, if the server has one. One value, stored like any other.
public struct Pages<Page: Sendable, Cursor: Sendable>: Sendable {
    /// The pages, oldest first.
    public private(set) var pages: [Page]
    /// The cursor each page was loaded with (`cursors[i]` loaded `pages[i]`).
    public private(set) var cursors: [Cursor]
    /// The cursor of the page after the last one; `nil` when the last page is the end.
    public private(set) var nextCursor: Cursor?
    /// The cursor of the page before the first one (newer posts above a feed, or a page `maxPages`
    /// let go); `nil` when the first page is the start.
    public private(set) var previousCursor: Cursor?
    /// The cursors of the pages `maxPages` let go from the front, oldest first: they load again, one
    /// after another, even when the paging cannot name a page's previous one. (Optional, so pages
    /// stored before it existed still decode.)
    var droppedBefore: [Cursor]?

    /// Pages loaded with these cursors (one per page).
    public init(pages: [Page], cursors: [Cursor], nextCursor: Cursor?, previousCursor: Cursor? = nil) {
        precondition(pages.count == cursors.count, "Pages: one cursor per page")
        self.pages = pages
        self.cursors = cursors
        self.nextCursor = nextCursor
        self.previousCursor = previousCursor
    }

    /// Whether the server has a page after the last one.
    public var hasNextPage: Bool { nextCursor != nil }
    /// Whether there is a page before the first one.
    public var hasPreviousPage: Bool { previousCursor != nil }

    /// These pages with the page at `index` changed by `transform`, cursors kept: how a paged
    /// query's ``PendingWrites`` show a write (a new post on top of the first page).
    public func updatingPage(at index: Int, _ transform: (Page) throws -> Page) rethrows -> Pages {
        var pages = self
        pages.pages[index] = try transform(pages.pages[index])
        return pages
    }

    /// These pages with `page` (loaded with `cursor`) appended, keeping at most `maxPages`: the
    /// first ones are let go, and the last let go becomes the previous page (loaded again by
    /// ``Query/fetchPreviousPage()``).
    func appending(_ page: Page, cursor: Cursor, next: Cursor?, maxPages: Int?) -> Pages {
        var pages = self
        pages.pages.append(page)
        pages.cursors.append(cursor)
        pages.nextCursor = next
        if let maxPages, pages.pages.count > maxPages {
            let dropped = pages.pages.count - maxPages
            pages.previousCursor = pages.cursors[dropped - 1]
            pages.droppedBefore = (pages.droppedBefore ?? []) + pages.cursors[..<dropped]
            pages.pages.removeFirst(dropped)
            pages.cursors.removeFirst(dropped)
        }
        return pages
    }
}

extension Pages where Cursor: Equatable {
    /// These pages with `page` (loaded with `cursor`) in front, keeping at most `maxPages`: the last
    /// ones are let go, and the first let go becomes the next page (loaded again by
    /// ``Query/fetchNextPage()``).
    func prepending(_ page: Page, cursor: Cursor, previous: Cursor?, maxPages: Int?) -> Pages {
        var pages = self
        pages.pages.insert(page, at: 0)
        pages.cursors.insert(cursor, at: 0)
        // Loaded again: no longer let go. The one before it is the paging's, or the next let go.
        if pages.droppedBefore?.last == cursor { pages.droppedBefore?.removeLast() }
        if pages.droppedBefore?.isEmpty == true { pages.droppedBefore = nil }
        pages.previousCursor = previous ?? pages.droppedBefore?.last
        if let maxPages, pages.pages.count > maxPages {
            pages.nextCursor = pages.cursors[maxPages]
            pages.pages.removeLast(pages.pages.count - maxPages)
            pages.cursors.removeLast(pages.cursors.count - maxPages)
        }
        return pages
    }
}

extension Pages: Equatable where Page: Equatable, Cursor: Equatable {}
extension Pages: Hashable where Page: Hashable, Cursor: Hashable {}
extension Pages: Codable where Page: Codable, Cursor: Codable {}

extension Pages where Page: Collection {
    /// Every page's elements, in order: what a list shows.
    public var items: [Page.Element] { pages.flatMap { $0 } }
}

/// How a paged query walks its pages: the first cursor, how a page names the next, how many pages
/// it keeps, and what a refetch reloads (``QueryClient/pagedQuery(_:tags:policy:paging:store:pendingWrites:page:)``).
public struct Paging<Page: Sendable, Cursor: Sendable>: Sendable {
    /// What a refetch (an invalidation, a trigger) reloads.
    ///
    /// A value whose first pages `maxPages` let go (a deep scroll: pages 5 to 14 held) is refilled
    /// from the first page it holds, as many pages as it holds, whichever is chosen: reloading page
    /// 1 would take the screen back to the top.
    public enum Refetch: Sendable, Hashable {
        /// The first page only: the value becomes that page (the default; the cheapest, and what a
        /// feed shows after coming back).
        case firstPage
        /// As many pages as the value holds, one after another from the first, so a list the user
        /// scrolled keeps its length.
        case allPages
    }

    /// The cursor of the first page.
    public var firstCursor: Cursor
    /// The most pages the value keeps: past it, a new page lets the oldest go; `nil`: no bound.
    public var maxPages: Int?
    /// What a refetch reloads.
    public var refetch: Refetch
    /// The cursor of the page after `page`, or `nil` when it is the last.
    public var nextCursor: @Sendable (_ page: Page) -> Cursor?
    /// The cursor of the page before `page` (a feed's newer posts), or `nil` when it is the first;
    /// `nil` here: pages go one way only (a page `maxPages` let go can still be loaded again).
    public var previousCursor: (@Sendable (_ page: Page) -> Cursor?)?

    /// A paging that starts at `firstCursor` and finds each next cursor with `nextCursor` (and each
    /// previous one with `previousCursor`, when pages go both ways).
    public init(
        firstCursor: Cursor, maxPages: Int? = nil, refetch: Refetch = .firstPage,
        previousCursor: (@Sendable (_ page: Page) -> Cursor?)? = nil,
        nextCursor: @escaping @Sendable (_ page: Page) -> Cursor?
    ) {
        precondition(maxPages.map { $0 > 0 } ?? true, "maxPages must be positive")
        self.firstCursor = firstCursor
        self.maxPages = maxPages
        self.refetch = refetch
        self.previousCursor = previousCursor
        self.nextCursor = nextCursor
    }
}

/// The first page of a paged query as a ``Pages`` value: the chain a paged query's refetch runs.
public struct FirstPageLoader<Base: Loader>: Loader {
    public typealias Input = Void
    public typealias Output = Pages<Base.Output, Base.Input>

    /// Loads one page for a cursor.
    public let base: Base
    /// Where the pages start.
    public let paging: Paging<Base.Output, Base.Input>

    public func load(_ input: Void) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Void, in context: LoadContext) async throws -> Output {
        let page = try await base.load(paging.firstCursor, in: context)
        return Pages(
            pages: [page], cursors: [paging.firstCursor], nextCursor: paging.nextCursor(page),
            previousCursor: paging.previousCursor?(page))
    }
}

extension FirstPageLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "first page", summary: base.chainSummary, children: [base.chainNode])
    }
}

/// What a paged query does beyond a plain one: load the next page, reload the pages after the
/// first on a refetch, save the pages; type-erased so ``Query`` holds it as its `Value`'s.
struct QueryPaging<Value: Sendable>: Sendable {
    /// The value with its next page appended, with the page's provenance; `nil` when there is none.
    let next: @Sendable (_ value: Value, _ context: LoadContext) async throws -> Served<Value>?
    /// The value with its previous page in front, with the page's provenance; `nil` when there is none.
    let previous: @Sendable (_ value: Value, _ context: LoadContext) async throws -> Served<Value>?
    /// Whether the value has a next page to load.
    let hasNext: @Sendable (_ value: Value) -> Bool
    /// Whether the value has a previous page to load.
    let hasPrevious: @Sendable (_ value: Value) -> Bool
    /// After a refetch loaded the first page: the pages after it reloaded as `refetch` asks, given
    /// the value shown before.
    let refill: @Sendable (_ loaded: Value, _ previous: Value?, _ context: LoadContext) async throws -> Value
    /// For a refetch: when the value shown is a window that no longer starts at the first page
    /// (`maxPages` let the first pages go), the same window reloaded from its first page, with the
    /// first page's provenance; `nil` otherwise (the chain reloads from the first page).
    let reloadWindow: @Sendable (_ shown: Value?, _ context: LoadContext) async throws -> Served<Value>?
    /// Saves the value stored at a time, if the query has a store (a failure is logged, never
    /// fails the load).
    let save: (@Sendable (_ value: Value, _ storedAt: Date) async -> Void)?
}

extension QueryPaging {
    init<PageLoader: Loader>(
        paging: Paging<PageLoader.Output, PageLoader.Input>, page: PageLoader,
        save: (@Sendable (Value, Date) async -> Void)?
    ) where Value == Pages<PageLoader.Output, PageLoader.Input>, PageLoader.Input: Equatable {
        next = { pages, context in
            guard let cursor = pages.nextCursor else { return nil }
            let served = try await page.loadServed(cursor, in: context)
            let appended = pages.appending(served.value, cursor: cursor, next: paging.nextCursor(served.value), maxPages: paging.maxPages)
            return Served(value: appended, provenance: served.provenance, events: served.events)
        }
        previous = { pages, context in
            guard let cursor = pages.previousCursor else { return nil }
            let served = try await page.loadServed(cursor, in: context)
            let prepended = pages.prepending(
                served.value, cursor: cursor, previous: paging.previousCursor?(served.value), maxPages: paging.maxPages)
            return Served(value: prepended, provenance: served.provenance, events: served.events)
        }
        hasNext = { $0.hasNextPage }
        hasPrevious = { $0.hasPreviousPage }
        refill = { loaded, previous, context in
            guard paging.refetch == .allPages, let previous else { return loaded }
            var pages = loaded
            while pages.pages.count < previous.pages.count, let cursor = pages.nextCursor, !Task.isCancelled {
                let next = try await page.load(cursor, in: context)
                pages = pages.appending(next, cursor: cursor, next: paging.nextCursor(next), maxPages: paging.maxPages)
            }
            return pages
        }
        reloadWindow = { shown, context in
            guard let shown, let first = shown.cursors.first, first != paging.firstCursor else { return nil }
            let served = try await page.loadServed(first, in: context)
            // The page before the window: the paging's, or the one `maxPages` let go.
            let before = paging.previousCursor.map { $0(served.value) } ?? shown.previousCursor
            var pages = Pages(
                pages: [served.value], cursors: [first], nextCursor: paging.nextCursor(served.value), previousCursor: before)
            pages.droppedBefore = shown.droppedBefore
            while pages.pages.count < shown.pages.count, let cursor = pages.nextCursor, !Task.isCancelled {
                let next = try await page.load(cursor, in: context)
                pages = pages.appending(next, cursor: cursor, next: paging.nextCursor(next), maxPages: paging.maxPages)
            }
            return Served(value: pages, provenance: served.provenance, events: served.events)
        }
        self.save = save
    }
}

extension QueryClient {
    /// The paged query for `key` (a feed): one entry holding its pages, whose first load (and every
    /// refetch) loads the first page, and whose ``Query/fetchNextPage()`` appends the next.
    ///
    /// ```swift
    /// let feed = queries.pagedQuery(
    ///     ["feed"], policy: QueryPolicy(staleAfter: .seconds(5 * 60)),
    ///     paging: Paging(firstCursor: 0, maxPages: 10) { page in page.next },
    ///     store: pagesStore,                      // the pages survive a relaunch
    ///     page: feedPageChain)                    // a Loader<Int, FeedPage>
    /// feed.fetchNextPage()                        // when the list nears its end
    /// feed.current.value?.items                   // every page's items, in order
    /// ```
    ///
    /// - Parameters:
    ///   - key: the query's key, as for `query(_:tags:policy:cached:enabled:pendingWrites:chain:)`.
    ///   - tags: names an invalidation can reach it by.
    ///   - policy: staleness, refetch triggers, network mode, retries, lifetime.
    ///   - paging: the first cursor, how a page names the next, how many pages are kept, what a
    ///     refetch reloads (``Paging/Refetch``: the first page, or as many as are shown).
    ///   - store: where the pages are kept, under the key's description (`"feed"`, `"posts/42"`):
    ///     read (any age) for the first value shown (the first frame for a memory store; a disk store
    ///     answers at the start of the first load), and written after every page loaded. A failed write
    ///     is logged and never fails the load. `nil`: the pages live in memory only.
    ///   - pendingWrites: an outbox's writes the pages show before the server has them (a post
    ///     written offline, on top of the feed), as for a plain query: applied to the pages on every
    ///     change, never saved with them, never seen by ``Query/fetchNextPage()``.
    ///   - page: loads one page for a cursor.
    public func pagedQuery<PageLoader: Loader>(
        _ key: QueryKey, tags: Set<String> = [], policy: QueryPolicy = QueryPolicy(),
        paging: Paging<PageLoader.Output, PageLoader.Input>,
        store: (any Store<String, Pages<PageLoader.Output, PageLoader.Input>>)? = nil,
        pendingWrites: PendingWrites<Pages<PageLoader.Output, PageLoader.Input>>? = nil,
        page: PageLoader
    ) -> Query<Pages<PageLoader.Output, PageLoader.Input>> where PageLoader.Output: Equatable, PageLoader.Input: Equatable {
        let storeKey = key.description
        var save: (@Sendable (Pages<PageLoader.Output, PageLoader.Input>, Date) async -> Void)?
        var cached: AnyLoader<Void, Pages<PageLoader.Output, PageLoader.Input>>?
        if let store {
            cached = Self.anyAge(store, key: storeKey)
            save = saving(to: store, key: storeKey, of: key)
        }
        return makeQuery(
            key, tags: tags, policy: policy, cached: cached,
            enabled: true, pendingWrites: pendingWrites,
            paging: QueryPaging(paging: paging, page: page, save: save),
            chain: FirstPageLoader(base: page, paging: paging))
    }
}

extension QueryClient {
    /// A loader of `store`'s entry for `key` at any age (opens the existential).
    static func anyAge<S: Store>(_ store: S, key: S.Key) -> AnyLoader<Void, S.Value> {
        AnyLoader(store.loader(key: key))
    }

    /// Saves a paged query's value in `store` under `key`, stamped with the time given; a failure
    /// is logged (the copy stored before stays) and never fails the load.
    func saving<S: Store>(to store: S, key: S.Key, of query: QueryKey) -> @Sendable (S.Value, Date) async -> Void {
        let environment = self.environment
        return { value, storedAt in
            do {
                try await store.insert(value, for: key, storedAt: storedAt)
            } catch {
                environment.logger.warning(
                    "a paged query's pages were not saved; the copy stored before stays",
                    metadata: ["query": "\(query)", "store": "\(store)", "error": "\(error)"])
            }
        }
    }
}

extension Query {
    /// Loads the page after the last one and appends it (a feed scrolled to its end). Does nothing
    /// when the query is not paged, has no value yet, the last page is the end, or a load runs (one
    /// load per query; call again when it has answered).
    public func fetchNextPage() {
        guard let paging, let value = current.value, paging.hasNext(value) else { return }
        send(.nextPageRequested)
    }
}
