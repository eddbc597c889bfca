// CuratorCounter is an Apache Curator DistributedAtomicLong (or
// DistributedAtomicInteger) client driven by the Go package curatortest
// through a line protocol.
//
// Usage: java CuratorCounter <connectString> <counterPath> long|int [sessionTimeoutMs]
//
// The counter path is a full server path (no Curator namespace). Each atomic
// value uses BoundedExponentialBackoffRetry(1 ms, 100 ms, 29); an operation
// whose optimistic attempts all lost is tried again until it succeeds. One
// line on stdin is one command; each answers with one line on stdout:
//
//   add <delta> <times>  -> ADDED <times> <last post value>   (times adds of delta)
//   get                  -> VALUE <value>
//   cas <expected> <new> -> CAS true|false <pre value>         (compareAndSet)
//   bench <clients> <n>  -> BENCH <n> <elapsedMs>   (clients new Curator clients, each
//                           with its own atomic value on the path, increment it n
//                           times in all, concurrently)
//   close                -> CLOSED                  (closes the Curator client)
//   quit or end of input -> the process exits
//
// At start it prints READY once connected. A failed command prints
// "ERR <command>: <exception>". Commands run one at a time on one worker
// thread.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicInteger;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.retry.BoundedExponentialBackoffRetry;

public final class CuratorCounter {
    private static String connect;
    private static String path;
    private static boolean wide;
    private static int sessionTimeout;

    /** One counter of either width, seen as longs. */
    private interface Counter {
        long add(long delta) throws Exception; // returns the post value, once succeeded

        long get() throws Exception;

        boolean cas(long expected, long n) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: CuratorCounter <connectString> <counterPath> long|int [sessionTimeoutMs]");
            System.exit(2);
        }
        connect = args[0];
        path = args[1];
        wide = args[2].equals("long");
        if (!wide && !args[2].equals("int")) {
            System.err.println("unknown width " + args[2]);
            System.exit(2);
        }
        sessionTimeout = args.length > 3 ? Integer.parseInt(args[3]) : 10000;
        CuratorFramework client = newClient();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            Proto.print("ERR connect: not connected after 20s");
            System.exit(1);
        }
        Counter counter = newCounter(client);
        BlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread worker = new Thread(() -> work(client, counter, commands), "worker");
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
            if (!line.isEmpty()) {
                commands.put(line);
            }
        }
        Proto.exit(client);
    }

    private static CuratorFramework newClient() {
        CuratorFramework client = Proto.newClient(connect, sessionTimeout);
        return client;
    }

    private static Counter newCounter(CuratorFramework client) {
        BoundedExponentialBackoffRetry retry = new BoundedExponentialBackoffRetry(1, 100, 29);
        if (wide) {
            DistributedAtomicLong l = new DistributedAtomicLong(client, path, retry);
            return new Counter() {
                public long add(long delta) throws Exception {
                    while (true) {
                        AtomicValue<Long> v = l.add(delta);
                        if (v.succeeded()) {
                            return v.postValue();
                        }
                    }
                }

                public long get() throws Exception {
                    return l.get().postValue();
                }

                public boolean cas(long expected, long n) throws Exception {
                    return l.compareAndSet(expected, n).succeeded();
                }
            };
        }
        DistributedAtomicInteger i = new DistributedAtomicInteger(client, path, retry);
        return new Counter() {
            public long add(long delta) throws Exception {
                while (true) {
                    AtomicValue<Integer> v = i.add((int) delta);
                    if (v.succeeded()) {
                        return v.postValue();
                    }
                }
            }

            public long get() throws Exception {
                return i.get().postValue();
            }

            public boolean cas(long expected, long n) throws Exception {
                return i.compareAndSet((int) expected, (int) n).succeeded();
            }
        };
    }

    private static void work(CuratorFramework client, Counter counter, BlockingQueue<String> commands) {
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
                    case "add": {
                        long delta = Long.parseLong(f[1]);
                        int times = Integer.parseInt(f[2]);
                        long last = 0;
                        for (int k = 0; k < times; k++) {
                            last = counter.add(delta);
                        }
                        Proto.print("ADDED " + times + " " + last);
                        break;
                    }
                    case "get":
                        Proto.print("VALUE " + counter.get());
                        break;
                    case "cas": {
                        long pre = counter.get();
                        boolean ok = counter.cas(Long.parseLong(f[1]), Long.parseLong(f[2]));
                        Proto.print("CAS " + ok + " " + pre);
                        break;
                    }
                    case "bench":
                        bench(Integer.parseInt(f[1]), Integer.parseInt(f[2]));
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

    private static void bench(int clients, int n) throws Exception {
        List<CuratorFramework> cs = new ArrayList<>();
        try {
            List<Counter> counters = new ArrayList<>();
            for (int k = 0; k < clients; k++) {
                CuratorFramework c = newClient();
                if (!c.blockUntilConnected(20, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("bench client not connected");
                }
                cs.add(c);
                Counter ctr = newCounter(c);
                ctr.get(); // warm up
                counters.add(ctr);
            }
            AtomicInteger left = new AtomicInteger(n);
            List<Exception> errors = Collections.synchronizedList(new ArrayList<>());
            List<Thread> threads = new ArrayList<>();
            long start = System.nanoTime();
            for (Counter ctr : counters) {
                Thread t = new Thread(() -> {
                    try {
                        while (left.decrementAndGet() >= 0) {
                            ctr.add(1);
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
            Proto.print("BENCH " + n + " " + TimeUnit.NANOSECONDS.toMillis(elapsed));
        } finally {
            for (CuratorFramework c : cs) {
                c.close();
            }
        }
    }
}
