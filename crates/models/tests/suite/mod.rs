mod grammar;
