//! Prints the slot each line of standard input states (a tool for reading the slot model).
use std::io::BufRead;

fn main() {
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let slot = trajwiki_memory::slots::slot_of(&line);
        println!("{line}\n    -> {slot:?}");
    }
}
