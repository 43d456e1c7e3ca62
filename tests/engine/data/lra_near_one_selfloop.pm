// mopmc's long-run average loses ~1e-4 relative where a recurrent class has self-loops of probability 1 - 1e-12
dtmc

module m
  x : [0..1] init 0;
  [] x=0 -> (1-1e-12):(x'=0) + 1e-12:(x'=1);
  [] x=1 -> (1-2e-12):(x'=1) + 2e-12:(x'=0);
endmodule

label "zero" = x=0;
rewards "r"
  x=0 : 1;
endrewards
