import ArgumentParser
import Foundation
import Strata

/// `strata send METHOD URL`.
public struct SendCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send an HTTP write through the durable outbox: sent now, or queued until 'strata outbox drain' can send it.",
        discussion: """
            The write is saved in the outbox first (beside strata fetch's cache: <cache-dir>/outbox/ \
            for --store file), then sent once. One line on standard output says what happened:
              sent STATUS ID       accepted (2xx); it has left the outbox
              queued ID: REASON    unreachable, or 408/429/5xx: 'outbox drain' sends it
              parked ID: REASON    refused (another 4xx, 501): kept as a dead letter;
                                   the status and the start of the body on standard error
            'strata outbox retry ID' queues a dead letter again, 'strata outbox discard ID' \
            removes it. A write queued behind earlier writes of the same scope (by default the URL's path) is \
            not sent before them: it is queued, and the drain sends them in order.

            Every attempt carries 'Idempotency-Key: ID' (the same on every attempt), so a server that \
            honours it applies the write once even when it is sent again. --if-match sends If-Match; \
            a 409 or 412 parks the write as a conflict.

            Credentials (Authorization, Proxy-Authorization, Cookie given with -H) are never written \
            to the outbox: this command adds them to its own attempt only. A write queued with them is \
            listed with credentials-not-kept=...; give them again with 'strata outbox drain -H'.

            --data: @FILE reads a file, - (or @-) reads standard input, anything else is sent as \
            given. Without a Content-Type header, a body that is JSON is sent as application/json, \
            any other as application/octet-stream.

            \(OutboxExitCode.helpTable)
            """
    )

    @Argument(help: "The method: POST, PUT, PATCH or DELETE (any case), or another write method.")
    var method: String

    @Argument(help: "The http or https URL.")
    var url: String

    @Option(name: .customLong("data"), help: "The body: @FILE, - for standard input, or the text itself.")
    var data: String?

    @Option(name: [.customShort("H"), .customLong("header")], help: "A header field, 'Name: value' (repeatable).")
    var headers: [String] = []

    @Option(help: "The write's scope: writes of one scope are delivered one at a time, in order (default: the URL's path).")
    var scope: String?

    @Option(help: "The ETag the write was made against, sent as If-Match (a 409 or 412 parks it as a conflict).")
    var ifMatch: String?

    @Option(help: "Give up on the attempt after this long (the write stays queued).", transform: DurationArgument.init(parsing:))
    var timeout: DurationArgument = DurationArgument(.seconds(30), description: "30s")

    @OptionGroup var outboxLocation: OutboxLocationOptions

    public init() {}

    /// Methods that do not write: `strata fetch` is for those.
    static let readMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "CONNECT"]

    public func validate() throws {
        _ = try parsedMethod()
        _ = try HTTPURLArgument.parse(url)
        _ = try parsedHeaderFields()
        guard timeout.duration > .zero else { throw ValidationError("--timeout must be longer than 0 (for example 30s)") }
        if let scope, scope.isEmpty { throw ValidationError("--scope must not be empty") }
        if let ifMatch, ifMatch.isEmpty { throw ValidationError("--if-match must not be empty") }
        if let data, data.hasPrefix("@"), data != "@-", !FileManager.default.isReadableFile(atPath: String(data.dropFirst())) {
            throw ValidationError("--data file '\(data.dropFirst())' does not exist or cannot be read")
        }
    }

    func parsedMethod() throws -> HTTPRequest.Method {
        let upper = method.uppercased()
        guard let parsed = HTTPRequest.Method(upper) else { throw ValidationError("'\(method)' is not an HTTP method") }
        guard !Self.readMethods.contains(upper) else {
            throw ValidationError("\(upper) does not write: strata send queues writes (POST, PUT, PATCH, DELETE); use strata fetch to read")
        }
        return parsed
    }

    func parsedHeaderFields() throws -> HTTPFields {
        var fields = HTTPFields()
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else {
                throw ValidationError("-H '\(Redaction.redactingSecrets(in: header))' is not 'Name: value'")
            }
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard let fieldName = HTTPField.Name(name) else {
                throw ValidationError("-H: '\(name)' is not a valid header name")
            }
            guard fieldName != OutboxHTTPWrites.idempotencyKeyField, fieldName != WithheldCredentials.markerField else {
                throw ValidationError("-H: \(name) is set by strata send itself")
            }
            guard fieldName != .ifMatch else { throw ValidationError("-H: use --if-match for If-Match") }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        return fields
    }

    /// The body `--data` names; throws ``ValidationError`` when a file or standard input cannot be read.
    func readBody() throws -> Data? {
        guard let data else { return nil }
        if data == "-" || data == "@-" {
            return FileHandle.standardInput.readDataToEndOfFile()
        }
        if data.hasPrefix("@") {
            let path = String(data.dropFirst())
            do {
                return try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw ValidationError("--data file '\(path)' cannot be read: \(error.localizedDescription)")
            }
        }
        return Data(data.utf8)
    }

    /// The options for ``Sender``, with `body` as the write's body.
    func senderOptions(body: Data?) throws -> Sender.Options {
        var fields = try parsedHeaderFields()
        if let body, fields[.contentType] == nil {
            let isJSON = (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) != nil
            fields[.contentType] = isJSON ? "application/json" : "application/octet-stream"
        }
        return Sender.Options(
            method: try parsedMethod(), url: URL(string: url)!, headerFields: fields, body: body, scope: scope,
            ifMatch: ifMatch, timeout: timeout.duration, location: outboxLocation.location)
    }

    public func run() async throws {
        let options: Sender.Options
        do {
            options = try senderOptions(body: try readBody())
        } catch let error as ValidationError {
            FileHandle.standardError.write(Data("strata send: \(error.message)\n".utf8))
            throw ExitCode(OutboxExitCode.usage.rawValue)
        }
        let code = await Sender(options: options).run(
            stdout: StandardOutput.writeLine,
            stderr: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
        if code != .ok { throw ExitCode(code.rawValue) }
    }
}
