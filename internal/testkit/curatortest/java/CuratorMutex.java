// CuratorMutex is an Apache Curator InterProcessMutex contender driven by the
// Go package curatortest through a line protocol.
//
// Usage: java CuratorMutex <connectString> <lockPath> [sessionTimeoutMs]
//
// The lock path is a full server path (no Curator namespace). One line on stdin
// is one command; each answers with one line on stdout:
//
//   acquire              -> ACQUIRED <node> <seq>          (blocks until held)
//   acquire <ms>         -> ACQUIRED <node> <seq> | TIMEOUT
//   release              -> RELEASED
//   participants         -> PARTICIPANTS <n> <node>...     (sorted, as Curator sees them;
//                           answered at once, also while an acquire waits)
//   cycles <n> <counter> -> COUNT <n>   after n rounds of acquire, read counter,
//                           write counter+1 (version -1, no check), release
//   bench <n>            -> BENCH <n> <nanoseconds>   after n rounds of acquire,
//                           release, timed together
//   close                -> CLOSED                         (closes the Curator client)
//   quit or end of input -> the process exits
//
// At start it prints READY once connected. A failed command prints
// "ERR <command>: <exception>". Commands other than participants and quit run
// one at a time on one worker thread, because InterProcessMutex ownership (and
// reentrancy) belongs to a thread.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.zookeeper.KeeperException;

public final class CuratorMutex {
    /** Exposes the node of the thread that holds the lock (protected in Curator). */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String ourNode() {
            return getLockPath();
        }
    }

    private static final String QUIT = "\u0000quit";

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: CuratorMutex <connectString> <lockPath> [sessionTimeoutMs]");
            System.exit(2);
        }
        int sessionTimeout = args.length > 2 ? Integer.parseInt(args[2]) : 2000;
        CuratorFramework client = Proto.connect(args[0], sessionTimeout);
        Mutex lock = new Mutex(client, args[1]);

        // The reader thread only queues commands, so "quit" and end of input
        // work even while the worker is blocked in acquire.
        BlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread worker = new Thread(() -> work(client, lock, commands), "worker");
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
                participants(lock); // a read: answered even while the worker waits in acquire
            } else if (!line.isEmpty()) {
                commands.put(line);
            }
        }
        Proto.exit(client);
    }

    private static void work(CuratorFramework client, Mutex lock, BlockingQueue<String> commands) {
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
                        if (f.length > 1) {
                            if (!lock.acquire(Long.parseLong(f[1]), TimeUnit.MILLISECONDS)) {
                                Proto.print("TIMEOUT");
                                break;
                            }
                        } else {
                            lock.acquire();
                        }
                        Proto.print("ACQUIRED " + Proto.nodeAndSeq(lock.ourNode(), "lock-"));
                        break;
                    case "release":
                        lock.release();
                        Proto.print("RELEASED");
                        break;
                    case "cycles":
                        Proto.print("COUNT " + cycles(client, lock, Integer.parseInt(f[1]), f[2]));
                        break;
                    case "bench":
                        int n = Integer.parseInt(f[1]);
                        long t0 = System.nanoTime();
                        for (int i = 0; i < n; i++) {
                            lock.acquire();
                            lock.release();
                        }
                        Proto.print("BENCH " + n + " " + (System.nanoTime() - t0));
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

    private static void participants(Mutex lock) {
        try {
            Collection<String> nodes = lock.getParticipantNodes();
            StringBuilder sb = new StringBuilder("PARTICIPANTS ").append(nodes.size());
            for (String n : nodes) {
                sb.append(' ').append(Proto.name(n));
            }
            Proto.print(sb.toString());
        } catch (Exception e) {
            Proto.print("ERR participants: " + Proto.describe(e));
        }
    }

    /**
     * Runs n lock cycles that each add one to the decimal counter in counterPath,
     * writing with version -1: only the lock keeps increments from being lost.
     */
    private static int cycles(CuratorFramework client, Mutex lock, int n, String counterPath) throws Exception {
        for (int i = 0; i < n; i++) {
            lock.acquire();
            try {
                int v = 0;
                try {
                    byte[] data = client.getData().forPath(counterPath);
                    String s = new String(data, StandardCharsets.UTF_8).trim();
                    if (!s.isEmpty()) {
                        v = Integer.parseInt(s);
                    }
                    client.setData().withVersion(-1).forPath(counterPath, Integer.toString(v + 1).getBytes(StandardCharsets.UTF_8));
                } catch (KeeperException.NoNodeException e) {
                    client.create().creatingParentContainersIfNeeded().forPath(counterPath, "1".getBytes(StandardCharsets.UTF_8));
                }
            } finally {
                lock.release();
            }
        }
        return n;
    }
}
