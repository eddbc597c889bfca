// Proto holds the small pieces of the stdout line protocol shared by the
// programs driven by the Go package curatortest.
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryNTimes;

final class Proto {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    private Proto() {
    }

    /**
     * Builds and starts a client of every program: the session timeout also
     * bounds the connection, and the retry policy is 10 tries 100 ms apart.
     */
    static CuratorFramework newClient(String connectString, int sessionTimeoutMs) {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connectString)
                .sessionTimeoutMs(sessionTimeoutMs)
                .connectionTimeoutMs(sessionTimeoutMs)
                .retryPolicy(new RetryNTimes(10, 100))
                .build();
        client.start();
        return client;
    }

    /**
     * newClient, then waits up to 20 s for its connection; without one it
     * prints "ERR connect" and exits with status 1.
     */
    static CuratorFramework connect(String connectString, int sessionTimeoutMs) throws InterruptedException {
        CuratorFramework client = newClient(connectString, sessionTimeoutMs);
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            print("ERR connect: not connected after 20s");
            System.exit(1);
        }
        return client;
    }

    /** Prints one protocol line; safe to call from any thread. */
    static void print(String line) {
        synchronized (OUT) {
            OUT.println(line);
        }
    }

    /** Returns the last segment of a znode path. */
    static String name(String path) {
        return path.substring(path.lastIndexOf('/') + 1);
    }

    /** Returns "<node name> <sequence>", the sequence being the digits after the last marker. */
    static String nodeAndSeq(String path, String marker) {
        String n = name(path);
        int i = n.lastIndexOf(marker);
        String seq = i < 0 ? "-1" : n.substring(i + marker.length());
        return n + " " + Long.parseLong(seq);
    }

    /** One-line description of an exception, with no newlines. */
    static String describe(Throwable e) {
        return (e.getClass().getSimpleName() + " " + e.getMessage()).replace('\n', ' ');
    }

    /**
     * Closes the client (ending its session at once) and exits with status 0.
     * The close gets two seconds: with the server gone it could wait longer.
     */
    static void exit(CuratorFramework client) {
        Thread closer = new Thread(() -> {
            try {
                client.close();
            } catch (RuntimeException e) {
                System.err.println("close: " + describe(e));
            }
        }, "closer");
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        print("BYE");
        System.exit(0);
    }
}
