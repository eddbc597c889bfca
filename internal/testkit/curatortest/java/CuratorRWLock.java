// CuratorRWLock is an Apache Curator InterProcessReadWriteLock contender
// driven by the Go package curatortest through a line protocol.
//
// Usage: java CuratorRWLock <connectString> <lockPath> <lockData> [sessionTimeoutMs]
//
// The lock path is a full server path (no Curator namespace); lockData (no
// white space) is stored in every lock node. One line on stdin is one
// command; each answers with one line on stdout:
//
//   read | write              -> ACQUIRED READ|WRITE <node> <seq>   (blocks until held)
//   read <ms> | write <ms>    -> ACQUIRED READ|WRITE <node> <seq> | TIMEOUT
//   release read|write        -> RELEASED READ|WRITE
//   participants              -> PARTICIPANTS <n> <node>...  (every read and write
//                                node, in Curator's order; answered at once,
//                                also while an acquire waits)
//   cycles <n> <counter> <c>  -> COUNT <writes> <reads> <violations>
//                                n rounds of client number c: round k writes iff
//                                (k+3c) mod 5 == 0. A write reads the decimal
//                                counter v, sets "writing", then v+1 (version -1,
//                                no check); a read reads the counter and counts a
//                                violation when it is not a number (it saw a
//                                write in progress).
//   bench <clients> <cycles> <c0>
//                             -> BENCH <ops> <nanos> <rp50> <rp99> <wp50> <wp99> <ops-read> <ops-write>
//                                starts that many more Curator clients, one thread
//                                each with its own lock on the path; client c0+i
//                                runs the cycles rule above with an empty
//                                critical section. Latencies are acquire times in
//                                microseconds; nanos is the wall time of the run.
//   close                     -> CLOSED                         (closes the client)
//   quit or end of input      -> the process exits
//
// At start it prints READY once connected. A failed command prints
// "ERR <command>: <exception>". Commands other than participants and quit run
// one at a time on one worker thread, because Curator's lock ownership (and
// reentrancy) belongs to a thread.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.LockInternals;
import org.apache.curator.framework.recipes.locks.StandardLockInternalsDriver;

public final class CuratorRWLock {
    private static final String READ = "__READ__";
    private static final String WRITE = "__WRIT__";

    /** The write lock, exposing the node of the thread that holds it. */
    static final class Writer extends InterProcessReadWriteLock.WriteLock {
        Writer(CuratorFramework client, String path, byte[] data) {
            super(client, path, data);
        }

        String ourNode() {
            return getLockPath();
        }
    }

    /** The read lock, exposing the node of the thread that holds it. */
    static final class Reader extends InterProcessReadWriteLock.ReadLock {
        Reader(CuratorFramework client, String path, byte[] data, Writer writer) {
            super(client, path, data, writer);
        }

        String ourNode() {
            return getLockPath();
        }
    }

    /** One read-write lock: InterProcessReadWriteLock's two halves. */
    static final class Lock {
        final Writer writer;
        final Reader reader;

        Lock(CuratorFramework client, String path, byte[] data) {
            writer = new Writer(client, path, data);
            reader = new Reader(client, path, data, writer);
        }

        InterProcessMutex side(boolean write) {
            return write ? writer : reader;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: CuratorRWLock <connectString> <lockPath> <lockData> [sessionTimeoutMs]");
            System.exit(2);
        }
        int sessionTimeout = args.length > 3 ? Integer.parseInt(args[3]) : 2000;
        CuratorFramework client = connect(args[0], sessionTimeout);
        if (client == null) {
            Proto.print("ERR connect: not connected after 20s");
            System.exit(1);
        }
        byte[] data = args[2].getBytes(StandardCharsets.UTF_8);
        Lock lock = new Lock(client, args[1], data);

        BlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread worker = new Thread(() -> work(client, lock, args, sessionTimeout, commands), "worker");
        worker.setDaemon(true);
        worker.start();
        Proto.print("READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("quit")) {
                break;
            }
            if (line.equals("participants")) {
                participants(client, args[1]);
            } else if (!line.isEmpty()) {
                commands.put(line);
            }
        }
        Proto.exit(client);
    }

    private static CuratorFramework connect(String connectString, int sessionTimeout) throws InterruptedException {
        CuratorFramework client = Proto.newClient(connectString, sessionTimeout);
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            client.close();
            return null;
        }
        return client;
    }

    private static void work(CuratorFramework client, Lock lock, String[] args, int sessionTimeout, BlockingQueue<String> commands) {
        while (true) {
            String line;
            try {
                line = commands.take();
            } catch (InterruptedException e) {
                return;
            }
            String[] f = line.split("\\s+");
            try {
                switch (f[0]) {
                    case "read":
                    case "write": {
                        boolean write = f[0].equals("write");
                        InterProcessMutex m = lock.side(write);
                        if (f.length > 1) {
                            if (!m.acquire(Long.parseLong(f[1]), TimeUnit.MILLISECONDS)) {
                                Proto.print("TIMEOUT");
                                break;
                            }
                        } else {
                            m.acquire();
                        }
                        String node = write ? lock.writer.ourNode() : lock.reader.ourNode();
                        Proto.print("ACQUIRED " + (write ? "WRITE " : "READ ") + Proto.nodeAndSeq(node, write ? WRITE : READ));
                        break;
                    }
                    case "release": {
                        boolean write = f[1].equals("write");
                        lock.side(write).release();
                        Proto.print("RELEASED " + (write ? "WRITE" : "READ"));
                        break;
                    }
                    case "cycles": {
                        long[] r = cycles(client, lock, Integer.parseInt(f[1]), f[2], Integer.parseInt(f[3]));
                        Proto.print("COUNT " + r[0] + " " + r[1] + " " + r[2]);
                        break;
                    }
                    case "bench":
                        Proto.print(bench(args[0], args[1], args[2], sessionTimeout, Integer.parseInt(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3])));
                        break;
                    case "close":
                        client.close();
                        Proto.print("CLOSED");
                        break;
                    default:
                        Proto.print("ERR " + line + ": unknown command");
                }
            } catch (Exception e) {
                Proto.print("ERR " + line + ": " + Proto.describe(e));
            }
        }
    }

    /** Whether round k of client c writes: (k+3c) mod 5 == 0. */
    static boolean writes(int k, int c) {
        return Math.floorMod(k + 3 * c, 5) == 0;
    }

    private static void participants(CuratorFramework client, String path) {
        try {
            List<String> nodes = LockInternals.getSortedChildren(client, path, READ,
                    (str, lockName) -> StandardLockInternalsDriver.standardFixForSorting(
                            StandardLockInternalsDriver.standardFixForSorting(str, READ), WRITE));
            List<String> ours = new ArrayList<>();
            for (String n : nodes) {
                if (n.contains(READ) || n.contains(WRITE)) {
                    ours.add(n);
                }
            }
            StringBuilder sb = new StringBuilder("PARTICIPANTS ").append(ours.size());
            for (String n : ours) {
                sb.append(' ').append(Proto.name(n));
            }
            Proto.print(sb.toString());
        } catch (Exception e) {
            Proto.print("ERR participants: " + Proto.describe(e));
        }
    }

    /** Runs n mixed rounds on the counter; returns writes, reads, violations. */
    private static long[] cycles(CuratorFramework client, Lock lock, int n, String counterPath, int c) throws Exception {
        long writes = 0, reads = 0, violations = 0;
        for (int k = 0; k < n; k++) {
            if (writes(k, c)) {
                lock.writer.acquire();
                try {
                    String s = new String(client.getData().forPath(counterPath), StandardCharsets.UTF_8);
                    int v = Integer.parseInt(s.trim());
                    client.setData().withVersion(-1).forPath(counterPath, "writing".getBytes(StandardCharsets.UTF_8));
                    client.setData().withVersion(-1).forPath(counterPath, Integer.toString(v + 1).getBytes(StandardCharsets.UTF_8));
                    writes++;
                } finally {
                    lock.writer.release();
                }
            } else {
                lock.reader.acquire();
                try {
                    String s = new String(client.getData().forPath(counterPath), StandardCharsets.UTF_8).trim();
                    try {
                        Integer.parseInt(s);
                    } catch (NumberFormatException e) {
                        violations++;
                    }
                    reads++;
                } finally {
                    lock.reader.release();
                }
            }
        }
        return new long[] {writes, reads, violations};
    }

    /** The benchmark workload on its own clients (see the header). */
    private static String bench(String connectString, String path, String data, int sessionTimeout,
            int clients, int cycles, int c0) throws Exception {
        List<CuratorFramework> opened = new ArrayList<>();
        try {
            List<Lock> locks = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                CuratorFramework cl = connect(connectString, Math.max(sessionTimeout, 10000));
                if (cl == null) {
                    throw new IllegalStateException("bench client not connected after 20s");
                }
                opened.add(cl);
                locks.add(new Lock(cl, path, data.getBytes(StandardCharsets.UTF_8)));
            }
            List<Long> readLat = Collections.synchronizedList(new ArrayList<>());
            List<Long> writeLat = Collections.synchronizedList(new ArrayList<>());
            AtomicReference<Exception> failed = new AtomicReference<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                final Lock l = locks.get(i);
                final int c = c0 + i;
                Thread th = new Thread(() -> {
                    try {
                        start.await();
                        for (int k = 0; k < cycles; k++) {
                            boolean w = writes(k, c);
                            InterProcessMutex m = l.side(w);
                            long t0 = System.nanoTime();
                            m.acquire();
                            long d = (System.nanoTime() - t0) / 1000;
                            (w ? writeLat : readLat).add(d);
                            m.release();
                        }
                    } catch (Exception e) {
                        failed.compareAndSet(null, e);
                    }
                }, "bench-" + i);
                threads.add(th);
                th.start();
            }
            long t0 = System.nanoTime();
            start.countDown();
            for (Thread th : threads) {
                th.join();
            }
            long nanos = System.nanoTime() - t0;
            if (failed.get() != null) {
                throw failed.get();
            }
            return "BENCH " + (long) clients * cycles + " " + nanos + " " + pct(readLat, 0.5) + " " + pct(readLat, 0.99)
                    + " " + pct(writeLat, 0.5) + " " + pct(writeLat, 0.99) + " " + readLat.size() + " " + writeLat.size();
        } finally {
            for (CuratorFramework cl : opened) {
                cl.close();
            }
        }
    }

    /** Nearest-rank percentile of the values, 0 if none. */
    private static long pct(List<Long> xs, double q) {
        List<Long> s = new ArrayList<>(xs);
        if (s.isEmpty()) {
            return 0;
        }
        Collections.sort(s);
        int i = (int) Math.ceil(q * s.size()) - 1;
        return s.get(Math.max(0, Math.min(i, s.size() - 1)));
    }
}
