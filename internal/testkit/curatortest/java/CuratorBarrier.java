// CuratorBarrier is an Apache Curator DistributedDoubleBarrier member (or a
// DistributedBarrier client) driven by the Go package curatortest through a
// line protocol.
//
// Usage: java CuratorBarrier <connectString> <barrierPath> double|single <members> [sessionTimeoutMs]
//
//   double <n>  DistributedDoubleBarrier(client, barrierPath, n)
//   single -    DistributedBarrier(client, barrierPath)
//
// The path is a full server path (no Curator namespace). One line on stdin
// is one command; each answers with one line on stdout:
//
//   enter                -> ENTERED          (double: blocks until n members entered)
//   leave                -> LEFT             (double: blocks until every member left)
//   set                  -> SET              (single: setBarrier)
//   remove               -> REMOVED          (single: removeBarrier)
//   wait                 -> WAITED           (single: waitOnBarrier, blocks while it is set)
//   close                -> CLOSED           (closes the Curator client)
//   quit or end of input -> the process exits
//
// At start it prints READY once connected. A failed command prints
// "ERR <command>: <exception>". Commands run one at a time on one worker
// thread.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;

public final class CuratorBarrier {
    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: CuratorBarrier <connectString> <barrierPath> double|single <members> [sessionTimeoutMs]");
            System.exit(2);
        }
        int sessionTimeout = args.length > 4 ? Integer.parseInt(args[4]) : 10000;
        CuratorFramework client = Proto.connect(args[0], sessionTimeout);
        DistributedDoubleBarrier dbl = null;
        DistributedBarrier single = null;
        switch (args[2]) {
            case "double":
                dbl = new DistributedDoubleBarrier(client, args[1], Integer.parseInt(args[3]));
                break;
            case "single":
                single = new DistributedBarrier(client, args[1]);
                break;
            default:
                System.err.println("unknown mode " + args[2]);
                System.exit(2);
        }
        final DistributedDoubleBarrier d = dbl;
        final DistributedBarrier b = single;
        BlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread worker = new Thread(() -> {
            while (true) {
                String line;
                try {
                    line = commands.take();
                } catch (InterruptedException e) {
                    return;
                }
                try {
                    switch (line) {
                        case "enter":
                            d.enter();
                            Proto.print("ENTERED");
                            break;
                        case "leave":
                            d.leave();
                            Proto.print("LEFT");
                            break;
                        case "set":
                            b.setBarrier();
                            Proto.print("SET");
                            break;
                        case "remove":
                            b.removeBarrier();
                            Proto.print("REMOVED");
                            break;
                        case "wait":
                            b.waitOnBarrier();
                            Proto.print("WAITED");
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
        }, "worker");
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
}
