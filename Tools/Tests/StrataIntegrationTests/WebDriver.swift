import Foundation
import Strata
import StrataAsyncHTTPClient
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// Headless Chromium driven over the W3C WebDriver protocol: Debian's `chromium` and
/// `chromium-driver` (installed by `.ci/run`), spoken to with plain JSON over HTTP, no driver
/// library. Each waits on a condition (the driver's own implicit wait for elements, a script that
/// resolves when the DOM says so), never on a fixed sleep.
final class WebDriver: Sendable {
    let driver: Child
    let port: Int
    let session: String

    /// The W3C element reference key.
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    /// Starts `chromedriver` on a free port and a headless Chromium session (1280×900, or
    /// `width`×`height` for a phone).
    static func start(width: Int = 1280, height: Int = 900, logs directory: TemporaryDirectory) async throws -> WebDriver {
        let chromedriver = try ExternalServer.executable("chromedriver", hint: "Debian: apt-get install -y chromium chromium-driver")
        let chromium = try ExternalServer.executable("chromium", hint: "Debian: apt-get install -y chromium chromium-driver")
        let port = try ListeningSocket.freePort()
        let driver = try Child.spawn(
            chromedriver, ["--port=\(port)", "--allowed-ips=127.0.0.1"],
            pipeStdin: false, pipeStdout: false, stdoutFile: directory.appending("chromedriver.log"),
            stderrFile: directory.appending("chromedriver-stderr.log"))
        let deadline = ContinuousClock.now + .seconds(20)
        while !ExternalServer.accepts(port: port) {
            guard ContinuousClock.now < deadline else {
                driver.signal(SIGTERM)
                throw TestError("chromedriver did not listen on 127.0.0.1:\(port) within 20 s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let capabilities: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    // The page's console, for ``consoleMessages()``.
                    "goog:loggingPrefs": ["browser": "ALL"],
                    "goog:chromeOptions": [
                        "binary": chromium.path,
                        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=\(width),\(height)"],
                    ],
                ],
            ],
        ]
        let answer = try await Self.call(port: port, "POST", "/session", capabilities)
        guard let value = answer["value"] as? [String: Any], let session = value["sessionId"] as? String else {
            driver.signal(SIGTERM)
            throw TestError("chromedriver made no session: \(answer)")
        }
        let webDriver = WebDriver(driver: driver, port: port, session: session)
        // Finding an element waits up to 10 s for it to appear; a script up to 10 s to resolve.
        _ = try await webDriver.command("POST", "/timeouts", ["implicit": 10_000, "script": 10_000])
        return webDriver
    }

    private init(driver: Child, port: Int, session: String) {
        self.driver = driver
        self.port = port
        self.session = session
    }

    /// Ends the session and the driver.
    func quit() async {
        _ = try? await command("DELETE", "", nil)
        driver.signal(SIGTERM)
        let driver = driver
        _ = try? await TwoProcessTests.offPool { driver.wait() }
    }

    func open(_ url: URL) async throws {
        _ = try await command("POST", "/url", ["url": url.absoluteString])
    }

    /// The element `selector` matches (waiting for it to appear), by its reference.
    func element(_ selector: String) async throws -> String {
        let answer = try await command("POST", "/element", ["using": "css selector", "value": selector])
        guard let value = answer["value"] as? [String: Any], let id = value[Self.elementKey] as? String else {
            throw TestError("no element matches \(selector): \(answer)")
        }
        return id
    }

    /// Clicks the element `selector` matches. The page re-renders on every change it is told of:
    /// an element found just before a re-render is stale by the click, so it is found again (a
    /// bounded number of times; each try waits on the driver, not on a timer).
    func click(_ selector: String) async throws {
        for attempt in 1...10 {
            let id = try await element(selector)
            do {
                _ = try await command("POST", "/element/\(id)/click", [:])
                return
            } catch let error as TestError where "\(error)".contains("stale element") && attempt < 10 {
                continue
            }
        }
    }

    /// The rendered text of the element `selector` matches, read in one step in the page (so a
    /// re-render cannot come between finding it and reading it).
    func text(_ selector: String) async throws -> String {
        _ = try await element(selector)   // waits for it to appear
        let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [selector]), as: UTF8.self)
        let value = try await evaluate("const e = document.querySelector(\(quoted)[0]); return e ? e.innerText : null")
        guard let text = value as? String else { throw TestError("no element matches \(selector)") }
        return text
    }

    /// Waits (in the page, on its own changes) until `condition`, a JavaScript expression, is true;
    /// throws with `what` when it is not within the script timeout.
    func waitUntil(_ condition: String, _ what: String) async throws {
        let script = """
            const done = arguments[arguments.length - 1];
            const check = () => { try { return Boolean(\(condition)); } catch (e) { return false; } };
            if (check()) { done(true); return; }
            const observer = new MutationObserver(() => { if (check()) { observer.disconnect(); done(true); } });
            observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
            """
        do {
            _ = try await command("POST", "/execute/async", ["script": script, "args": []])
        } catch {
            throw TestError("waited for \(what): \(error)")
        }
    }

    /// Types `text` into the element `selector` matches (as a person would, key by key).
    func type(_ selector: String, _ text: String) async throws {
        let id = try await element(selector)
        _ = try await command("POST", "/element/\(id)/value", ["text": text])
    }

    /// The W3C codes of keys that are not characters.
    enum Key {
        static let tab = "\u{E004}"
        static let enter = "\u{E007}"
    }

    /// Presses and releases each of `keys` in turn on whatever has the focus (``Key`` or characters).
    func press(_ keys: [String]) async throws {
        let actions = keys.flatMap { [["type": "keyDown", "value": $0], ["type": "keyUp", "value": $0]] }
        _ = try await command("POST", "/actions", ["actions": [["type": "key", "id": "keyboard", "actions": actions]]])
    }

    /// The `id` of the element that has the focus (empty for the body).
    func focusedID() async throws -> String {
        try await evaluate("return document.activeElement ? document.activeElement.id : ''") as? String ?? ""
    }

    /// Runs `script` in the page and returns its value; `async`: the value it passes to its last
    /// argument, a callback (within the script timeout).
    func evaluate(_ script: String, async: Bool = false) async throws -> Any? {
        try await command("POST", async ? "/execute/async" : "/execute/sync", ["script": script, "args": []])["value"]
    }

    /// What the page wrote to its console since the last call (chromedriver's log of the browser,
    /// which also has what Chromium reports there itself, such as a Content-Security-Policy
    /// violation, from the source `security`): each message with its level (`SEVERE`, `WARNING`,
    /// `INFO`) and source (`console-api`, `network`, `security`, …).
    func consoleMessages() async throws -> [(level: String, source: String, message: String)] {
        let answer = try await command("POST", "/se/log", ["type": "browser"])
        let entries = answer["value"] as? [[String: Any]] ?? []
        return entries.map {
            (level: $0["level"] as? String ?? "", source: $0["source"] as? String ?? "", message: $0["message"] as? String ?? "")
        }
    }

    /// The console's reports of content the page's Content-Security-Policy refused (an inline
    /// handler, a style attribute, a script without the nonce, a connection elsewhere), since the
    /// last read of the console.
    func contentSecurityPolicyViolations() async throws -> [String] {
        try await consoleMessages()
            .filter { $0.source == "security" || $0.message.contains("Content Security Policy") || $0.message.contains("Refused to") }
            .map(\.message)
    }

    /// A PNG of the viewport, written to `file`.
    func screenshot(to file: URL) async throws {
        guard let base64 = try await command("GET", "/screenshot", nil)["value"] as? String, let png = Data(base64Encoded: base64) else {
            throw TestError("the screenshot came back empty")
        }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try png.write(to: file)
    }

    private func command(_ method: String, _ path: String, _ body: [String: Any]?) async throws -> [String: Any] {
        try await Self.call(port: port, method, "/session/\(session)\(path)", body)
    }

    /// One WebDriver call. Through AsyncHTTPClient: chromedriver writes its header fields without
    /// a space after the colon, which URLSession on Linux refuses ("Failed writing header").
    private static func call(port: Int, _ method: String, _ path: String, _ body: [String: Any]?) async throws -> [String: Any] {
        var request = HTTPRequest(method: HTTPRequest.Method(method)!, url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        var data: Data?
        if let body {
            data = try JSONSerialization.data(withJSONObject: body)
            request.headerFields[.contentType] = "application/json"
        }
        let reply = try await transport.send(request, body: data, options: HTTPRequestOptions(timeout: .seconds(60)))
        let object = (try? JSONSerialization.jsonObject(with: reply.body)) as? [String: Any] ?? [:]
        if reply.status.code >= 400 {
            throw TestError("WebDriver \(method) \(path): \(reply.status.code) \(object["value"] ?? "")")
        }
        return object
    }

    private static let transport = AsyncHTTPTransport(maxBodyBytes: nil)
}

/// Where browser tests keep their screenshots: `$STRATA_ARTIFACTS/screenshots`, or
/// `.build/artifacts/screenshots` of the repository.
enum Artifacts {
    static var screenshots: URL {
        if let root = ProcessInfo.processInfo.environment["STRATA_ARTIFACTS"] {
            return URL(fileURLWithPath: root).appendingPathComponent("screenshots")
        }
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return repository.appendingPathComponent(".build/artifacts/screenshots")
    }
}
