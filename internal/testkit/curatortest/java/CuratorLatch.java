// CuratorLatch is an Apache Curator LeaderLatch participant driven by the Go
// package curatortest through a line protocol.
//
// Usage: java CuratorLatch <connectString> <latchPath> <participantId> [sessionTimeoutMs]
//
// The latch path is a full server path (no Curator namespace); the participant
// id is the latch node's data and must not contain white space. One line on
// stdin is one command:
//
//   start        -> STARTED                 (latch.start(); joins the election)
//   status       -> STATUS LEADER|NOTLEADER <ourPath or ->
//   participants -> PARTICIPANTS <leaderId or -> <id>...   (in node order)
//   close        -> CLOSED                  (latch.close(NOTIFY_LEADER); a leader
//                                             prints NOTLEADER before CLOSED)
//   quit or end of input -> the process exits
//
// Leadership transitions are printed as they happen, from the latch listener:
// "LEADER <ourPath>" and "NOTLEADER". At start it prints READY once connected.
// A failed command prints "ERR <command>: <exception>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;

public final class CuratorLatch {
    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: CuratorLatch <connectString> <latchPath> <participantId> [sessionTimeoutMs]");
            System.exit(2);
        }
        int sessionTimeout = args.length > 3 ? Integer.parseInt(args[3]) : 2000;
        CuratorFramework client = Proto.connect(args[0], sessionTimeout);
        LeaderLatch latch = new LeaderLatch(client, args[1], args[2], LeaderLatch.CloseMode.NOTIFY_LEADER);
        // The listener runs on the thread that changes leadership (Curator's
        // default direct executor), so transitions are printed in order.
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                Proto.print("LEADER " + latch.getOurPath());
            }

            @Override
            public void notLeader() {
                Proto.print("NOTLEADER");
            }
        });
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
            try {
                switch (line) {
                    case "start":
                        latch.start();
                        Proto.print("STARTED");
                        break;
                    case "status": {
                        String ours = latch.getOurPath();
                        Proto.print("STATUS " + (latch.hasLeadership() ? "LEADER" : "NOTLEADER") + " "
                                + (ours == null ? "-" : ours));
                        break;
                    }
                    case "participants": {
                        StringBuilder sb = new StringBuilder("PARTICIPANTS ");
                        String leader = latch.getLeader().getId();
                        sb.append(leader.isEmpty() ? "-" : leader);
                        for (Participant p : latch.getParticipants()) {
                            sb.append(' ').append(p.getId());
                        }
                        Proto.print(sb.toString());
                        break;
                    }
                    case "close":
                        latch.close();
                        Proto.print("CLOSED");
                        break;
                    default:
                        Proto.print("ERR " + line + ": unknown command");
                }
            } catch (Exception e) {
                Proto.print("ERR " + line + ": " + Proto.describe(e));
            }
        }
        if (latch.getState() == LeaderLatch.State.STARTED) {
            try {
                latch.close();
            } catch (Exception e) {
                System.err.println("latch close: " + Proto.describe(e));
            }
        }
        Proto.exit(client);
    }
}
