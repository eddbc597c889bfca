// CuratorTreeCache is an Apache Curator TreeCache driven by the Go package
// curatortest through a line protocol, to measure it beside the Go tree
// cache on the same server and data.
//
// Usage: java CuratorTreeCache <connectString> <path> [sessionTimeoutMs]
//
// The path is a full server path (no Curator namespace). One line on stdin
// is one command; each answers with one line on stdout:
//
//   load      -> LOADED <nodes> <loadNanos> <heapBefore> <heapAfter>
//                (starts a TreeCache on the path and waits for INITIALIZED;
//                heap: bytes used after System.gc(), before the start and
//                after the load; nodes: the cached nodes, the root included)
//   watches   -> WATCHES <data> <exist> <child>   (the paths the ZooKeeper
//                client holds watches on, by kind)
//   arm <p>   -> ARMED; then, at the next NODE_UPDATED of the node at full
//                path p: CHANGED <epochNanos> <data>, epochNanos read with
//                Instant.now() in the listener
//   close     -> CLOSED   (closes the TreeCache)
//   quit or end of input -> the process exits
//
// At start it prints READY once connected. A failed command prints
// "ERR <command>: <exception>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.TreeCache;
import org.apache.curator.framework.recipes.cache.TreeCacheEvent;
import org.apache.zookeeper.ZooKeeper;

@SuppressWarnings("deprecation") // TreeCache: the recipe measured
public final class CuratorTreeCache {
    private static final AtomicReference<String> armed = new AtomicReference<>();

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: CuratorTreeCache <connectString> <path> [sessionTimeoutMs]");
            System.exit(2);
        }
        String path = args[1];
        int sessionTimeout = args.length > 2 ? Integer.parseInt(args[2]) : 10000;
        CuratorFramework client = Proto.connect(args[0], sessionTimeout);
        Proto.print("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        TreeCache cache = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            try {
                switch (f[0]) {
                case "load":
                    cache = load(client, path);
                    break;
                case "watches":
                    ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
                    Proto.print("WATCHES " + watches(zk, "getDataWatches") + " " + watches(zk, "getExistWatches") + " "
                            + watches(zk, "getChildWatches"));
                    break;
                case "arm":
                    armed.set(f[1]);
                    Proto.print("ARMED");
                    break;
                case "close":
                    if (cache != null) {
                        cache.close();
                        cache = null;
                    }
                    Proto.print("CLOSED");
                    break;
                case "quit":
                    Proto.exit(client);
                    return;
                default:
                    Proto.print("ERR " + f[0] + ": unknown command");
                }
            } catch (Exception e) {
                Proto.print("ERR " + f[0] + ": " + Proto.describe(e));
            }
        }
        Proto.exit(client);
    }

    private static TreeCache load(CuratorFramework client, String path) throws Exception {
        long before = usedHeap();
        CountDownLatch initialized = new CountDownLatch(1);
        TreeCache cache = TreeCache.newBuilder(client, path).build();
        cache.getListenable().addListener((c, ev) -> {
            if (ev.getType() == TreeCacheEvent.Type.INITIALIZED) {
                initialized.countDown();
            } else if (ev.getType() == TreeCacheEvent.Type.NODE_UPDATED) {
                ChildData d = ev.getData();
                String want = armed.get();
                if (d != null && want != null && want.equals(d.getPath()) && armed.compareAndSet(want, null)) {
                    Instant now = Instant.now();
                    long nanos = now.getEpochSecond() * 1_000_000_000L + now.getNano();
                    Proto.print("CHANGED " + nanos + " " + new String(d.getData(), StandardCharsets.UTF_8));
                }
            }
        });
        long start = System.nanoTime();
        cache.start();
        if (!initialized.await(120, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not initialized after 120s");
        }
        long took = System.nanoTime() - start;
        long after = usedHeap();
        Proto.print("LOADED " + count(cache, path) + " " + took + " " + before + " " + after);
        return cache;
    }

    private static int count(TreeCache cache, String path) {
        Map<String, ChildData> kids = cache.getCurrentChildren(path);
        if (kids == null) {
            return 0;
        }
        int n = 1;
        for (String name : kids.keySet()) {
            n += count(cache, path + "/" + name);
        }
        return n;
    }

    /** Bytes of heap in use after two full collections. */
    private static long usedHeap() {
        Runtime rt = Runtime.getRuntime();
        System.gc();
        System.gc();
        return rt.totalMemory() - rt.freeMemory();
    }

    /** The number of paths the client holds watches of one kind on (a protected ZooKeeper method). */
    @SuppressWarnings("unchecked")
    private static int watches(ZooKeeper zk, String getter) throws Exception {
        Method m = ZooKeeper.class.getDeclaredMethod(getter);
        m.setAccessible(true);
        return ((List<String>) m.invoke(zk)).size();
    }
}
