import DemoServer
import Foundation
import Hummingbird
import Testing
@_spi(StrataInternals) import Strata
import StrataQueries
import StrataInspector
import StrataTesting

/// The inspector's page in a real browser: headless Chromium (Debian's, through chromedriver) opens
/// `/inspector` served by the inspector's own application on 127.0.0.1, while a live query loads the
/// demo server's feed over real HTTP. The test clicks as a person would and asserts the DOM after each
/// step; the screenshots of the key steps are kept (`.build/artifacts/screenshots/`).
@Suite("The inspector in headless Chromium", .timeLimit(.minutes(2)), .serialized)
struct InspectorBrowserTests {
    @Test("the page lists the live query, shows its chain and value, and its Invalidate refetches exactly once")
    func invalidateFromThePage_refetchesOnce() async throws {
        try await withDemoServer { server in
            let logs = try TemporaryDirectory(prefix: "strata-inspector-browser")
            let queries = QueryClient()
            let feed = queries.query(
                ["feed"], tags: ["home"], policy: QueryPolicy(staleAfter: .seconds(300)),
                chain: HTTPLoader(url: server.feedURL, transport: URLSessionHTTPClient()).decoding([FeedItem].self)
                    .named("remote \(server.feedURL.absoluteString)?token=s3cr3t-value"))
            let observing = Task { for await _ in feed.snapshots() {} }
            defer { observing.cancel() }
            try await feed.waitForObservers(1)
            try await feed.settled()
            #expect(server.requestCount() == 1)

            let inspector = StrataInspector(queries: queries)
            try await inspector.serving { port in
                let browser = try await WebDriver.start(logs: logs)
                do {
                    try await browser.open(URL(string: "http://127.0.0.1:\(port)/inspector")!)
                    try await browser.waitUntil(##"document.querySelector("#queries tr.query")"##, "the query's row")
                    #expect(try await browser.text("#queries tr.query td:first-child") == "feed")
                    #expect(try await browser.text("#queries tr.query .badge") == "fresh")
                    try await browser.screenshot(to: Artifacts.screenshots.appendingPathComponent("inspector-1-queries.png"))

                    // Selecting the row shows the chain, with the secret in its URL redacted, and the value.
                    try await browser.click("#queries tr.query")
                    try await browser.waitUntil(##"document.querySelector("#detail pre")"##, "the query's detail")
                    let chain = try await browser.text("#detail pre")
                    #expect(chain.contains("HTTP GET"))
                    #expect(!chain.contains("s3cr3t-value"), "redacted in the page as in logs")
                    let page = try await browser.evaluate("return document.body.innerText") as? String ?? ""
                    #expect(!page.contains("s3cr3t-value"))
                    try await browser.screenshot(to: Artifacts.screenshots.appendingPathComponent("inspector-2-detail.png"))

                    // Invalidate: the observed query refetches, once.
                    try await browser.click("#detail .actions button:nth-child(2)")
                    await server.waitForRequests(count: 2)
                    try await feed.settled()
                    try await browser.waitUntil(
                        ##"[...document.querySelectorAll("#timeline .bar")].some(bar => bar.textContent.includes("invalidated · value"))"##,
                        "the refetch in the timeline")
                    #expect(server.requestCount() == 2, "one refetch, counted by the server")
                    try await browser.screenshot(to: Artifacts.screenshots.appendingPathComponent("inspector-3-invalidated.png"))

                    // Export JSON: fetched with the token, handed to a download link. The link's click
                    // is caught (a headless download has nowhere to go) and marks the page instead.
                    _ = try await browser.evaluate(##"""
                        HTMLAnchorElement.prototype.click = function () {
                          document.body.dataset.exported = this.download + " " + this.href.startsWith("blob:");
                        };
                        window.alert = message => { document.body.dataset.alerted = message; };
                        """##)
                    try await browser.click("#export")
                    try await browser.waitUntil(##"document.body.dataset.exported || document.body.dataset.alerted"##, "the export")
                    #expect(try await browser.evaluate("return document.body.dataset.exported") as? String == "strata-inspector.json true")
                    let withoutToken = try await browser.evaluate(##"""
                        const done = arguments[arguments.length - 1];
                        fetch(location.pathname + "/api/state").then(r => done(r.status));
                        """##, async: true) as? Int
                    #expect(withoutToken == 403, "the page's own origin gets nothing without the token either")

                    // Under its policy (nonce'd script and style only), the page ran whole: not one refusal.
                    #expect(try await browser.contentSecurityPolicyViolations() == [])
                } catch {
                    await browser.quit()
                    throw error
                }
                await browser.quit()
            }
        }
    }
}
