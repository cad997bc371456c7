import DemoServer
import Foundation
import StrataDemo
import StrataTesting
import Testing

/// `strata demo --web` in a real browser: headless Chromium (Debian's, through chromedriver) opens
/// the feed page served by the demo on 127.0.0.1, drives the offline-first story with the keyboard
/// and the mouse, and asserts the DOM after each step; the inspector beside it refetches once when
/// asked. Screenshots of the key steps are kept (`.build/artifacts/screenshots/`).
@Suite("The web demo in headless Chromium", .timeLimit(.minutes(3)), .serialized)
struct FeedPageBrowserTests {
    /// Runs `body` with the demo served and a browser of `width`×`height`; ends both after.
    func withDemoInBrowser(width: Int = 1280, height: Int = 900, _ body: (FeedWebDemo, WebDriver, URL) async throws -> Void) async throws {
        let logs = try TemporaryDirectory(prefix: "strata-feed-browser")
        try await FeedWebDemoTests.withWebDemo { demo, base in
            let browser = try await WebDriver.start(width: width, height: height, logs: logs)
            do {
                try await body(demo, browser, base)
            } catch {
                await browser.quit()
                throw error
            }
            await browser.quit()
        }
    }

    func shot(_ name: String) -> URL { Artifacts.screenshots.appendingPathComponent(name) }

    /// The titles of the listed posts, in order, with their marks (`Pending` or `#id`).
    let titles = ##"return [...document.querySelectorAll("#items li h3")].map(h => h.innerText)"##

    @Test("offline, a day later: the cached feed with a stale badge; a post written offline shows pending; online, the server's post takes its place")
    func theOfflineFirstStory() async throws {
        try await withDemoInBrowser { demo, browser, base in
            try await browser.open(base)
            try await browser.waitUntil(##"document.querySelectorAll("#items li").length === 5"##, "the first page")
            #expect(try await browser.text("#badge") == "remote · just now")
            #expect(try await browser.evaluate(##"return document.getElementById("badge").className"##) as? String == "badge fresh")
            #expect(try await browser.text("#phase") == "Up to date")
            #expect(try await browser.evaluate(titles) as? [String] == (8...12).reversed().map { "Sample post \($0) #\($0)" })

            try await browser.click("#next-page")
            try await browser.waitUntil(##"document.querySelectorAll("#items li").length === 10"##, "the second page appended")
            try await browser.screenshot(to: shot("feed-1-online.png"))

            // By keyboard from here: from the page's heading, Tab reaches the first control.
            try await browser.click("header h1")
            try await browser.press([WebDriver.Key.tab])
            #expect(try await browser.focusedID() == "network")
            try await browser.press([WebDriver.Key.enter])
            try await browser.waitUntil(##"document.getElementById("network-state").innerText === "offline""##, "offline")
            #expect(try await browser.text("#server-state") == "refusing connections")

            try await browser.press([WebDriver.Key.tab])
            #expect(try await browser.focusedID() == "clock")
            try await browser.press([WebDriver.Key.enter])
            try await browser.waitUntil(##"document.getElementById("badge").className === "badge stale""##, "the stale badge")
            #expect(try await browser.text("#badge") == "remote · 1d 0h old · stale")

            try await browser.press([WebDriver.Key.tab])
            #expect(try await browser.focusedID() == "refresh")
            try await browser.press([WebDriver.Key.enter])
            try await browser.waitUntil(##"document.getElementById("badge").innerText.startsWith("stale local")"##, "the feed from the cache")
            #expect(try await browser.text("#badge") == "stale local · 1d 0h old · stale")
            #expect(try await browser.evaluate(##"return document.querySelectorAll("#items li").length"##) as? Int == 10, "both pages, from the cache")
            try await browser.screenshot(to: shot("feed-2-offline-stale.png"))

            // A post written offline: typed, Enter submits; shown at once, marked pending.
            try await browser.press([WebDriver.Key.tab])
            #expect(try await browser.focusedID() == "post-title")
            try await browser.press(Array("Written offline").map(String.init) + [WebDriver.Key.enter])
            try await browser.waitUntil(##"document.querySelector("#items li.pending")"##, "the pending post")
            #expect(try await browser.text("#items li.pending h3") == "Written offline Pending")
            #expect(try await browser.text("#outbox") == "1 waiting")
            #expect(demo.server.posts.count == 12, "nothing reached the server")
            try await browser.screenshot(to: shot("feed-3-pending.png"))

            // Online: the outbox delivers it, the feed refetches, the server's post replaces the mark.
            try await browser.click("#network")
            try await browser.waitUntil(
                ##"!document.querySelector("#items li.pending") && document.querySelector("#items li h3").innerText === "Written offline #13""##,
                "the server's post in place of the pending one")
            try await browser.waitUntil(##"document.getElementById("badge").className === "badge fresh""##, "a fresh feed")
            #expect(try await browser.text("#badge") == "remote · just now")
            #expect(try await browser.text("#outbox") == "0 waiting")
            #expect(demo.server.posts.values.filter { $0.title == "Written offline" }.count == 1, "created once")
            try await browser.screenshot(to: shot("feed-4-delivered.png"))
            #expect(try await browser.contentSecurityPolicyViolations() == [], "the page's policy refused nothing it needs")
        }
    }

    @Test("day two in the page: the counter is a selection that moves only with the count, Load newer is the previous page, and a refused post's optimistic row rolls back")
    func dayTwo_selectPreviousPageAndARolledBackMutation() async throws {
        try await withDemoInBrowser { demo, browser, base in
            try await browser.open(base)
            try await browser.waitUntil(##"document.getElementById("count").innerText.startsWith("5 posts shown")"##, "the counter of the first page")
            let changes = ##"return Number(document.getElementById("count").innerText.match(/changed (\d+) time/)[1])"##
            let loaded = try #require(try await browser.evaluate(changes) as? Int)

            // A refresh that brings the same posts: the feed publishes (fetching, then fresh), the
            // counter's selection does not change, so it is not told.
            let requests = try #require(Int(try await browser.text("#requests")))
            try await browser.click("#refresh")
            try await browser.waitUntil(##"Number(document.getElementById("requests").innerText) > \##(requests) && document.getElementById("phase").innerText === "Up to date""##, "the refresh answered")
            #expect(try await browser.evaluate(changes) as? Int == loaded, "the same count: the selection did not change")

            // Scrolled past two pages: the first goes (two are kept), and "Load newer" brings it back.
            try await browser.click("#next-page")
            try await browser.waitUntil(##"document.getElementById("count").innerText.startsWith("10 posts shown")"##, "two pages")
            #expect(try await browser.evaluate(changes) as? Int == loaded + 1)
            try await browser.click("#next-page")
            try await browser.waitUntil(##"document.getElementById("count").innerText.startsWith("7 posts shown")"##, "pages 2 and 3")
            #expect(try await browser.evaluate(##"return document.getElementById("previous-page").hidden"##) as? Bool == false)
            #expect(try await browser.evaluate(titles) as? [String] == (1...7).reversed().map { "Sample post \($0) #\($0)" })
            try await browser.screenshot(to: shot("feed-day-two-1-window.png"))
            try await browser.click("#previous-page")
            try await browser.waitUntil(##"document.getElementById("count").innerText.startsWith("10 posts shown") && document.getElementById("previous-page").hidden"##, "page 1 again, in front")
            #expect(try await browser.evaluate(titles) as? [String] == (3...12).reversed().map { "Sample post \($0) #\($0)" })
            #expect(try await browser.text("#next-page") == "Next page", "page 3 went from the far end: it is the next page again")

            // The server refuses posts: the post's row shows at once (held at the server so the
            // screenshot catches it), then rolls back when the 422 comes, and the page says why.
            try await browser.click("#refuse-posts")
            try await browser.waitUntil(##"document.getElementById("refuse-posts").checked"##, "the switch on")
            var faults = demo.server.faults
            faults.holdRequests = true
            demo.server.faults = faults
            try await browser.type("#post-title", "Refused post")
            try await browser.click("#post")
            try await browser.waitUntil(##"document.querySelector("#items li.sending")"##, "the optimistic row")
            #expect(try await browser.text("#items li.sending h3") == "Refused post Sending…")
            #expect(try await browser.text("#badge") == "set locally · just now")
            #expect(try await browser.text("#post") == "Posting…")
            try await browser.waitUntil(##"document.getElementById("count").innerText.startsWith("11 posts shown")"##, "the counter with the optimistic row")
            try await browser.screenshot(to: shot("feed-day-two-2-optimistic.png"))
            faults.holdRequests = false
            demo.server.faults = faults
            demo.server.releaseHeldRequests()
            try await browser.waitUntil(##"!document.querySelector("#items li.sending") && !document.getElementById("post-error").hidden"##, "the rollback")
            #expect(try await browser.text("#post-error") == "Not posted: the server refused the post: 422 Unprocessable Content: injected write fault: the write was rejected as invalid")
            #expect(try await browser.text("#badge").hasPrefix("fresh local"), "the provenance it held, not the optimistic value's")
            #expect(try await browser.evaluate(titles) as? [String] == (3...12).reversed().map { "Sample post \($0) #\($0)" }, "exactly the feed before")
            #expect(try await browser.text("#count").hasPrefix("10 posts shown"))
            #expect(demo.server.posts.count == 12, "the server has nothing of it")
            try await browser.screenshot(to: shot("feed-day-two-3-rolled-back.png"))

            // Accepted again: the row shows, then the server's post in its place.
            try await browser.click("#refuse-posts")
            try await browser.waitUntil(##"!document.getElementById("refuse-posts").checked"##, "the switch off")
            try await browser.type("#post-title", "Accepted post")
            try await browser.click("#post")
            try await browser.waitUntil(##"document.querySelector("#items li h3").innerText === "Accepted post #13" && !document.querySelector("#items li.sending")"##, "the server's post")
            #expect(try await browser.evaluate(##"return document.getElementById("post-error").hidden"##) as? Bool == true)
            #expect(try await browser.contentSecurityPolicyViolations() == [], "the page's policy refused nothing it needs")
        }
    }

    @Test("the inspector beside the page: the feed's chain with the tier that served it, and Invalidate refetches exactly once")
    func theInspector_invalidatesTheFeedOnce() async throws {
        try await withDemoInBrowser { demo, browser, base in
            try await demo.feed.settled()
            try await browser.open(base.appendingPathComponent("inspector"))
            try await browser.click("#queries tr.query")
            try await browser.waitUntil(##"document.querySelector("#detail pre")"##, "the feed's detail")
            let chain = try await browser.text("#detail pre")
            #expect(chain.contains("fresh local"))
            #expect(chain.contains("bundled default"))
            #expect(try await browser.text("#detail pre .served").contains("remote"), "the tier that served the last load is marked")
            let before = demo.server.requestCount(path: "/posts/pages/1")

            try await browser.click("#detail .actions button:nth-child(2)")
            try await browser.waitUntil(
                ##"[...document.querySelectorAll("#timeline .bar")].some(bar => bar.textContent.includes("invalidated · value"))"##,
                "the refetch in the timeline")
            try await demo.feed.settled()
            #expect(demo.server.requestCount(path: "/posts/pages/1") == before + 1, "one refetch, counted by the server")
            #expect(demo.feed.current.lastFetchReason == .invalidated)
            try await browser.screenshot(to: shot("feed-5-inspector.png"))
            #expect(try await browser.contentSecurityPolicyViolations() == [])
        }
    }

    @Test("at phone width both pages fit the screen, and every control has a label", arguments: ["", "inspector"])
    func atPhoneWidth_thePageFits(path: String) async throws {
        try await withDemoInBrowser(width: 390, height: 844) { demo, browser, base in
            try await demo.feed.settled()
            try await browser.open(path.isEmpty ? base : base.appendingPathComponent(path))
            try await browser.waitUntil(##"document.querySelector("#items li, #queries tr.query")"##, "the page's content")
            let fits = try await browser.evaluate("return document.documentElement.scrollWidth <= window.innerWidth") as? Bool
            #expect(fits == true, "no sideways scrolling at 390 px")
            let unlabelled = try await browser.evaluate(##"""
                return [...document.querySelectorAll("button, input, [tabindex]")]
                    .filter(e => !(e.labels && e.labels.length) && !e.innerText.trim() && !e.getAttribute("aria-label"))
                    .map(e => e.outerHTML.slice(0, 80))
                """##) as? [String]
            #expect(unlabelled == [], "every control says what it does")
            try await browser.screenshot(to: shot("phone-\(path.isEmpty ? "feed" : path).png"))
            #expect(try await browser.contentSecurityPolicyViolations() == [])
        }
    }
}
