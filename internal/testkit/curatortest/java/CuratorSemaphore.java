// CuratorSemaphore is an Apache Curator InterProcessSemaphoreV2 (or
// InterProcessSemaphoreMutex) participant driven by the Go package
// curatortest through a line protocol.
//
// Usage: java CuratorSemaphore <connectString> <semPath> <mode> <arg> [sessionTimeoutMs]
//
//   mode max   <n>          InterProcessSemaphoreV2(client, semPath, n)
//   mode count <countPath>  SharedCount(client, countPath, 1), started, and
//                           InterProcessSemaphoreV2(client, semPath, count);
//                           the count's listener prints "CHANGED <n>"
//   mode mutex -            InterProcessSemaphoreMutex(client, semPath)
//
// Paths are full server paths (no Curator namespace). One line on stdin is
// one command; each answers with one line on stdout:
//
//   acquire [n] [ms]     -> ACQUIRED <n> <node>...    (blocks until held; n leases, 1 by
//                           default; the mutex prints "-" for the node) | TIMEOUT
//   release              -> RELEASED                   (the oldest lease held, or the mutex)
//   releaseall           -> RELEASED <n>
//   participants         -> PARTICIPANTS <n> <node>... (children of semPath/leases in sequence
//                           order; answered at once, also while an acquire waits)
//   count                -> COUNT <value> <version>    (mode count: the SharedCount's value)
//   setcount <n>         -> SETCOUNT <n>
//   snapshot             -> SNAPSHOT <value> <version> (keeps the count's versioned value)
//   trysetcount <n>      -> TRYSET true|false          (trySetCount on the snapshot)
//   cycles <n> <holdMs> <holdersPath> [<counterPath>]
//                        -> CYCLES <n> <maxSeen>       after n rounds of: acquire one lease, add 1
//                           to the decimal holders counter (compare-and-set on its version),
//                           then with a counterPath read it and write it + 1 with version -1
//                           (no check), sleep holdMs, subtract 1 from holders, release;
//                           maxSeen is the highest holders value this process wrote
//   bench <clients> <n> <holdMs> <max>
//                        -> BENCH <n> <elapsedMs> <p50us> <p99us> <peak>
//                           (clients new Curator clients, each an InterProcessSemaphoreV2 of
//                           max leases on semPath, take n leases in all, each held holdMs;
//                           waits are acquire call to return; peak: most leases held at
//                           once in this process)
//   close                -> CLOSED                     (closes the Curator client)
//   quit or end of input -> the process exits
//
// At start it prints READY once connected. A failed command prints
// "ERR <command>: <exception>". Commands other than participants and quit run
// one at a time on one worker thread.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedCountListener;
import org.apache.curator.framework.recipes.shared.SharedCountReader;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public final class CuratorSemaphore {
    private static String connect;
    private static String semPath;
    private static int sessionTimeout;
    private static InterProcessSemaphoreV2 sem;
    private static InterProcessSemaphoreMutex mutex;
    private static SharedCount count;
    private static final Deque<Lease> held = new ArrayDeque<>();
    private static boolean mutexHeld;
    private static VersionedValue<Integer> snapshot;

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: CuratorSemaphore <connectString> <semPath> max|count|mutex <arg> [sessionTimeoutMs]");
            System.exit(2);
        }
        connect = args[0];
        semPath = args[1];
        sessionTimeout = args.length > 4 ? Integer.parseInt(args[4]) : 2000;
        CuratorFramework client = newClient();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            Proto.print("ERR connect: not connected after 20s");
            System.exit(1);
        }
        switch (args[2]) {
            case "max":
                sem = new InterProcessSemaphoreV2(client, semPath, Integer.parseInt(args[3]));
                break;
            case "count":
                count = new SharedCount(client, args[3], 1);
                count.addListener(new SharedCountListener() {
                    @Override
                    public void countHasChanged(SharedCountReader reader, int n) {
                        Proto.print("CHANGED " + n);
                    }

                    @Override
                    public void stateChanged(CuratorFramework c, ConnectionState s) {
                    }
                });
                count.start();
                sem = new InterProcessSemaphoreV2(client, semPath, count);
                break;
            case "mutex":
                mutex = new InterProcessSemaphoreMutex(client, semPath);
                break;
            default:
                System.err.println("unknown mode " + args[2]);
                System.exit(2);
        }

        BlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread worker = new Thread(() -> work(client, commands), "worker");
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
                participants(client); // a read: answered even while the worker waits
            } else if (!line.isEmpty()) {
                commands.put(line);
            }
        }
        Proto.exit(client);
    }

    private static CuratorFramework newClient() {
        CuratorFramework client = Proto.newClient(connect, sessionTimeout);
        return client;
    }

    private static void work(CuratorFramework client, BlockingQueue<String> commands) {
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
                    case "acquire":
                        acquire(f);
                        break;
                    case "release":
                        release();
                        Proto.print("RELEASED");
                        break;
                    case "releaseall": {
                        int n = 0;
                        while (!held.isEmpty() || mutexHeld) {
                            release();
                            n++;
                        }
                        Proto.print("RELEASED " + n);
                        break;
                    }
                    case "count": {
                        VersionedValue<Integer> v = count.getVersionedValue();
                        Proto.print("COUNT " + v.getValue() + " " + v.getVersion());
                        break;
                    }
                    case "setcount":
                        count.setCount(Integer.parseInt(f[1]));
                        Proto.print("SETCOUNT " + f[1]);
                        break;
                    case "snapshot":
                        snapshot = count.getVersionedValue();
                        Proto.print("SNAPSHOT " + snapshot.getValue() + " " + snapshot.getVersion());
                        break;
                    case "trysetcount":
                        Proto.print("TRYSET " + count.trySetCount(snapshot, Integer.parseInt(f[1])));
                        break;
                    case "cycles":
                        Proto.print("CYCLES " + f[1] + " " + cycles(client, Integer.parseInt(f[1]), Long.parseLong(f[2]), f[3],
                                f.length > 4 ? f[4] : null));
                        break;
                    case "bench":
                        bench(Integer.parseInt(f[1]), Integer.parseInt(f[2]), Long.parseLong(f[3]), Integer.parseInt(f[4]));
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

    private static void acquire(String[] f) throws Exception {
        int n = f.length > 1 ? Integer.parseInt(f[1]) : 1;
        long ms = f.length > 2 ? Long.parseLong(f[2]) : -1;
        if (mutex != null) {
            if (ms >= 0) {
                if (!mutex.acquire(ms, TimeUnit.MILLISECONDS)) {
                    Proto.print("TIMEOUT");
                    return;
                }
            } else {
                mutex.acquire();
            }
            mutexHeld = true;
            Proto.print("ACQUIRED 1 -");
            return;
        }
        Collection<Lease> got = ms >= 0 ? sem.acquire(n, ms, TimeUnit.MILLISECONDS) : sem.acquire(n);
        if (got == null) {
            Proto.print("TIMEOUT");
            return;
        }
        StringBuilder sb = new StringBuilder("ACQUIRED ").append(got.size());
        for (Lease l : got) {
            held.add(l);
            sb.append(' ').append(l.getNodeName());
        }
        Proto.print(sb.toString());
    }

    private static void release() throws Exception {
        if (mutex != null) {
            mutex.release();
            mutexHeld = false;
            return;
        }
        Lease l = held.poll();
        if (l == null) {
            throw new IllegalStateException("no lease held");
        }
        l.close();
    }

    private static void participants(CuratorFramework client) {
        try {
            List<String> nodes;
            try {
                nodes = new ArrayList<>(client.getChildren().forPath(semPath + "/leases"));
            } catch (KeeperException.NoNodeException e) {
                nodes = new ArrayList<>();
            }
            nodes.sort((a, b) -> a.substring(a.lastIndexOf('-') + 1).compareTo(b.substring(b.lastIndexOf('-') + 1)));
            StringBuilder sb = new StringBuilder("PARTICIPANTS ").append(nodes.size());
            for (String n : nodes) {
                sb.append(' ').append(n);
            }
            Proto.print(sb.toString());
        } catch (Exception e) {
            Proto.print("ERR participants: " + Proto.describe(e));
        }
    }

    /** Adds delta to the decimal counter at path by compare-and-set; returns the new value. */
    private static int casAdd(CuratorFramework client, String path, int delta) throws Exception {
        while (true) {
            Stat st = new Stat();
            byte[] d = client.getData().storingStatIn(st).forPath(path);
            String s = new String(d, StandardCharsets.UTF_8).trim();
            int v = (s.isEmpty() ? 0 : Integer.parseInt(s)) + delta;
            try {
                client.setData().withVersion(st.getVersion()).forPath(path, Integer.toString(v).getBytes(StandardCharsets.UTF_8));
                return v;
            } catch (KeeperException.BadVersionException e) {
                // someone else changed it: read again
            }
        }
    }

    private static int cycles(CuratorFramework client, int n, long holdMs, String holders, String counter) throws Exception {
        int maxSeen = 0;
        for (int i = 0; i < n; i++) {
            Lease lease = null;
            if (mutex != null) {
                mutex.acquire();
            } else {
                lease = sem.acquire();
            }
            try {
                maxSeen = Math.max(maxSeen, casAdd(client, holders, 1));
                if (counter != null) {
                    byte[] d = client.getData().forPath(counter);
                    String s = new String(d, StandardCharsets.UTF_8).trim();
                    int v = s.isEmpty() ? 0 : Integer.parseInt(s);
                    client.setData().withVersion(-1).forPath(counter, Integer.toString(v + 1).getBytes(StandardCharsets.UTF_8));
                }
                if (holdMs > 0) {
                    Thread.sleep(holdMs);
                }
                casAdd(client, holders, -1);
            } finally {
                if (mutex != null) {
                    mutex.release();
                } else {
                    lease.close();
                }
            }
        }
        return maxSeen;
    }

    private static void bench(int clients, int n, long holdMs, int max) throws Exception {
        List<CuratorFramework> cs = new ArrayList<>();
        List<InterProcessSemaphoreV2> sems = new ArrayList<>();
        try {
            for (int i = 0; i < clients; i++) {
                CuratorFramework c = newClient();
                if (!c.blockUntilConnected(20, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("bench client not connected");
                }
                cs.add(c);
                InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(c, semPath, max);
                s.returnLease(s.acquire()); // warm up
                sems.add(s);
            }
            AtomicInteger left = new AtomicInteger(n);
            AtomicInteger holding = new AtomicInteger();
            AtomicInteger peak = new AtomicInteger();
            List<Long> waits = Collections.synchronizedList(new ArrayList<>());
            List<Exception> errors = Collections.synchronizedList(new ArrayList<>());
            List<Thread> threads = new ArrayList<>();
            long start = System.nanoTime();
            for (InterProcessSemaphoreV2 s : sems) {
                Thread t = new Thread(() -> {
                    try {
                        while (left.decrementAndGet() >= 0) {
                            long t0 = System.nanoTime();
                            Lease l = s.acquire();
                            waits.add(System.nanoTime() - t0);
                            int h = holding.incrementAndGet();
                            peak.accumulateAndGet(h, Math::max);
                            Thread.sleep(holdMs);
                            holding.decrementAndGet();
                            l.close();
                        }
                    } catch (Exception e) {
                        errors.add(e);
                    }
                });
                threads.add(t);
                t.start();
            }
            for (Thread t : threads) {
                t.join();
            }
            long elapsed = System.nanoTime() - start;
            if (!errors.isEmpty()) {
                throw errors.get(0);
            }
            List<Long> ws = new ArrayList<>(waits);
            Collections.sort(ws);
            long p50 = ws.get((int) ((ws.size() - 1) * 0.5)) / 1000;
            long p99 = ws.get((int) ((ws.size() - 1) * 0.99)) / 1000;
            Proto.print("BENCH " + n + " " + elapsed / 1000000 + " " + p50 + " " + p99 + " " + peak.get());
        } finally {
            for (CuratorFramework c : cs) {
                c.close();
            }
        }
    }
}
