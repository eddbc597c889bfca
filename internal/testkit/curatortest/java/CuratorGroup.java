// CuratorGroup is an Apache Curator GroupMember (and, on demand, a
// PersistentNode) driven by the Go package curatortest through a line
// protocol.
//
// Usage: java CuratorGroup <connectString> <groupPath> <memberId> <data> [sessionTimeoutMs]
//
// The group path is a full server path (no Curator namespace); the member id
// and data ("-" for empty data) must not contain white space. One line on
// stdin is one command:
//
//   start               -> STARTED                     (member.start(); joins the group)
//   members             -> MEMBERS <id>=<data>...       (getCurrentMembers, sorted by id)
//   setdata <data>      -> SET                         (setThisData)
//   close               -> CLOSED                      (member.close(); leaves the group)
//   node <mode> <path> <data> -> NODE <actualPath>     (a PersistentNode, started and waited for
//                                                        up to 20 s; mode: eph = EPHEMERAL,
//                                                        peph = EPHEMERAL with protection,
//                                                        pseq = EPHEMERAL_SEQUENTIAL with protection)
//   nodeclose           -> NODECLOSED                  (closes that PersistentNode)
//   quit or end of input -> the process exits
//
// At start it prints READY once connected. A failed command prints
// "ERR <command>: <exception>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.zookeeper.CreateMode;

public final class CuratorGroup {
    private static byte[] bytes(String data) {
        return data.equals("-") ? new byte[0] : data.getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: CuratorGroup <connectString> <groupPath> <memberId> <data> [sessionTimeoutMs]");
            System.exit(2);
        }
        int sessionTimeout = args.length > 4 ? Integer.parseInt(args[4]) : 10000;
        CuratorFramework client = Proto.connect(args[0], sessionTimeout);
        GroupMember member = new GroupMember(client, args[1], args[2], bytes(args[3]));
        PersistentNode node = null;
        boolean started = false;
        Proto.print("READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("quit")) {
                break;
            }
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\\s+");
            try {
                switch (f[0]) {
                    case "start":
                        member.start();
                        started = true;
                        Proto.print("STARTED");
                        break;
                    case "members": {
                        StringBuilder sb = new StringBuilder("MEMBERS");
                        Map<String, byte[]> sorted = new TreeMap<>(member.getCurrentMembers());
                        for (Map.Entry<String, byte[]> e : sorted.entrySet()) {
                            sb.append(' ').append(e.getKey()).append('=')
                                    .append(new String(e.getValue(), StandardCharsets.UTF_8));
                        }
                        Proto.print(sb.toString());
                        break;
                    }
                    case "setdata":
                        member.setThisData(bytes(f[1]));
                        Proto.print("SET");
                        break;
                    case "close":
                        member.close();
                        started = false;
                        Proto.print("CLOSED");
                        break;
                    case "node":
                        if (node != null) {
                            throw new IllegalStateException("a node is running: nodeclose first");
                        }
                        CreateMode mode = f[1].equals("pseq") ? CreateMode.EPHEMERAL_SEQUENTIAL : CreateMode.EPHEMERAL;
                        node = new PersistentNode(client, mode, !f[1].equals("eph"), f[2], bytes(f[3]));
                        node.start();
                        if (!node.waitForInitialCreate(20, TimeUnit.SECONDS)) {
                            Proto.print("ERR " + line + ": not created within 20s");
                            break;
                        }
                        Proto.print("NODE " + node.getActualPath());
                        break;
                    case "nodeclose":
                        if (node != null) {
                            node.close();
                            node = null;
                        }
                        Proto.print("NODECLOSED");
                        break;
                    default:
                        Proto.print("ERR " + line + ": unknown command");
                }
            } catch (Exception e) {
                Proto.print("ERR " + line + ": " + Proto.describe(e));
            }
        }
        try {
            if (node != null) {
                node.close();
            }
            if (started) {
                member.close();
            }
        } catch (Exception e) {
            System.err.println("close: " + Proto.describe(e));
        }
        Proto.exit(client);
    }
}
