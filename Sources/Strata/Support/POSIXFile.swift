import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The few POSIX file operations FileStore needs, with errno turned into readable errors.
package enum POSIXFile {
    package struct Failure: Error, CustomStringConvertible {
        package var call: String
        package var path: String
        package var code: Int32
        package var description: String { "\(call)(\(path)): \(String(cString: strerror(code))) (errno \(code))" }

        package init(call: String, path: String, code: Int32) {
            self.call = call
            self.path = path
            self.code = code
        }
    }

    /// The contents of `path` and its inode, or `nil` when it does not exist.
    package static func read(_ path: String) throws -> (data: Data, inode: UInt64)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw Failure(call: "open", path: path, code: errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Failure(call: "fstat", path: path, code: errno) }
        var data = Data(count: Int(info.st_size))
        var filled = 0
        let size = data.count
        let readError: Int32? = data.withUnsafeMutableBytes { buffer -> Int32? in
            while filled < size {
                let n = Glibc_read(fd, buffer.baseAddress! + filled, size - filled)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if n == 0 { break }  // the file shrank while we read it: what we have is what there is
                filled += n
            }
            return nil
        }
        if let readError { throw Failure(call: "read", path: path, code: readError) }
        if filled < size { data.removeSubrange(filled...) }
        return (data, UInt64(info.st_ino))
    }

    /// Writes `data` to a new file at `temporaryPath` (mode `mode`, never following or replacing an
    /// existing file), flushes it to disk, then atomically renames it over `path`. On any failure the
    /// temporary file is removed and `path` is untouched.
    package static func writeAtomically(_ data: Data, to path: String, via temporaryPath: String, mode: mode_t, sync: Bool) throws {
        try writeNew(data, at: temporaryPath, mode: mode, sync: sync)
        try commit(temporaryPath, to: path, sync: sync)
    }

    /// Writes each file of `files` as ``writeAtomically(_:to:via:mode:sync:)`` writes one, with one
    /// directory flush for all of them: every temporary file is written and flushed (`chunk` at a
    /// time, their flushes side by side, so no more than `chunk` descriptors are open), then each is
    /// renamed into place, then the directory (`directory`, which holds them all) is flushed once.
    /// When it returns, every file is durable. When it throws, each target holds its previous
    /// version or its new one, whole, no temporary file is left, and the directory was flushed
    /// after any rename that happened.
    package static func writeAtomically(
        _ files: [(data: Data, path: String, temporaryPath: String)], in directory: String, mode: mode_t, chunk: Int = 32
    ) throws {
        var written = 0  // temporary files created
        var renamed = 0
        defer {
            for file in files[renamed..<written] { unlink(file.temporaryPath) }
            // A rename that happened is flushed even when a later step failed: whoever reads the
            // file back then finds it durable, or (the flush failing too) as durable as it can be.
            if renamed > 0, written > 0, renamed < files.count { _ = flushDirectory(directory) }
        }
        while written < files.count {
            let part = files[written..<min(written + chunk, files.count)]
            var descriptors: [Int32] = []
            defer { for fd in descriptors { close(fd) } }
            for file in part {
                let fd = open(file.temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
                guard fd >= 0 else { throw Failure(call: "open", path: file.temporaryPath, code: errno) }
                descriptors.append(fd)
                written += 1
                try writeAll(file.data, to: fd, path: file.temporaryPath)
            }
            // Flushed side by side: the file system's journal commits the flushes that wait together
            // as one, where flushing one after another pays a journal commit each.
            let failures = Locked<[Failure]>([])
            let opened = descriptors
            let paths = part.map(\.temporaryPath)
            DispatchQueue.concurrentPerform(iterations: opened.count) { index in
                if fsync(opened[index]) != 0 {
                    let failure = Failure(call: "fsync", path: paths[index], code: errno)
                    failures.withLock { $0.append(failure) }
                }
            }
            if let failure = failures.withLock({ $0.first }) { throw failure }
        }
        for file in files {
            guard rename(file.temporaryPath, file.path) == 0 else { throw Failure(call: "rename", path: file.path, code: errno) }
            renamed += 1
        }
        if let failure = flushDirectory(directory) { throw failure }
    }

    /// Flushes the directory at `path`; the failure, if any.
    private static func flushDirectory(_ path: String) -> Failure? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return Failure(call: "open", path: path, code: errno) }
        defer { close(fd) }
        return fsync(fd) == 0 ? nil : Failure(call: "fsync", path: path, code: errno)
    }

    /// Writes `data` to a new file at `temporaryPath` (mode `mode`, never following or replacing an
    /// existing file) and flushes it when `sync`; on failure nothing is left at `temporaryPath`.
    package static func writeNew(_ data: Data, at temporaryPath: String, mode: mode_t, sync: Bool) throws {
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw Failure(call: "open", path: temporaryPath, code: errno) }
        var succeeded = false
        defer { if !succeeded { unlink(temporaryPath) } }
        defer { close(fd) }
        try writeAll(data, to: fd, path: temporaryPath)
        if sync, fsync(fd) != 0 { throw Failure(call: "fsync", path: temporaryPath, code: errno) }
        succeeded = true
    }

    /// Renames `temporaryPath` over `path` (flushing the directory entry when `sync`); on failure the
    /// temporary file is removed and `path` is untouched.
    package static func commit(_ temporaryPath: String, to path: String, sync: Bool) throws {
        guard rename(temporaryPath, path) == 0 else {
            let code = errno
            unlink(temporaryPath)
            throw Failure(call: "rename", path: path, code: code)
        }
        if sync { syncDirectory(containing: path) }
    }

    /// Writes all of `data` at the current offset of `fd`.
    package static func writeAll(_ data: some DataProtocol & ContiguousBytes, to fd: Int32, path: String) throws {
        let writeError: Int32? = data.withUnsafeBytes { buffer -> Int32? in
            var written = 0
            while written < buffer.count {
                let n = Glibc_write(fd, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                written += n
            }
            return nil
        }
        if let writeError { throw Failure(call: "write", path: path, code: writeError) }
    }

    /// Flushes the directory entry of `path`, so a rename survives power loss. Best effort: the entry is
    /// already in place and readable, so a failure here does not fail the write.
    package static func syncDirectory(containing path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let fd = open(directory, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }

    /// Removes `path`; succeeds when it does not exist.
    package static func remove(_ path: String) throws {
        if unlink(path) != 0, errno != ENOENT {
            throw Failure(call: "unlink", path: path, code: errno)
        }
    }

    /// Removes `path` only if it is still the file with `inode` (so a corrupt file is removed without
    /// racing away a valid one another process just renamed into place).
    package static func remove(_ path: String, ifInode inode: UInt64) {
        var info = stat()
        guard stat(path, &info) == 0, UInt64(info.st_ino) == inode else { return }
        unlink(path)
    }

    /// The first `count` bytes of the regular file at `path` (fewer when it is shorter), or `nil`
    /// when it cannot be opened or read.
    package static func readPrefix(_ path: String, count: Int) -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data = Data(count: count)
        let read = data.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, 0) }
        guard read >= 0 else { return nil }
        data.count = read
        return data
    }

    /// The inode of the file `path` names (not following a symbolic link), or `nil` when there is none.
    package static func inode(of path: String) -> UInt64? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return UInt64(info.st_ino)
    }

    /// Whether `path` names a file last modified more than `age` seconds before `now`.
    package static func isOlder(_ path: String, than age: TimeInterval, now: TimeInterval) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        return now - modificationTime(info) > age
    }

    /// Removes `path` when it is a regular file last modified more than `age` seconds before `now`
    /// (a symbolic link is not followed, and not removed). Returns whether it removed it.
    package static func removeIfOlder(_ path: String, than age: TimeInterval, now: TimeInterval) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return false }
        return now - modificationTime(info) > age && unlink(path) == 0
    }

    /// When the file `info` describes was last modified, in seconds since 1970.
    package static func modificationTime(_ info: stat) -> TimeInterval {
        #if canImport(Darwin)
        Double(info.st_mtimespec.tv_sec) + Double(info.st_mtimespec.tv_nsec) / 1e9
        #else
        Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        #endif
    }

    /// The names in directory `path` (without `.` and `..`).
    package static func fileNames(in path: String) throws -> [String] {
        guard let directory = opendir(path) else { throw Failure(call: "opendir", path: path, code: errno) }
        defer { closedir(directory) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw Failure(call: "readdir", path: path, code: errno) }
                return names
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) { String(cString: $0) }
            }
            if name != ".", name != ".." { names.append(name) }
        }
    }

    /// Creates `path` and its parents with `mode` when missing.
    package static func createDirectory(_ path: String, mode: mode_t) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            if isDirectory.boolValue { return }
            throw Failure(call: "mkdir", path: path, code: ENOTDIR)
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: NSNumber(value: mode)])
        } catch {
            // Another process may have created it between the check and the call.
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return }
            throw error
        }
    }
}

@inline(__always)
private func Glibc_read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(fd, buffer, count)
}

@inline(__always)
private func Glibc_write(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}
